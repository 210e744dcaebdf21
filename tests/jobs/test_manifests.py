"""deploy/ and docker/ without Docker, Kubernetes or a cloud: every manifest parses, names the
image defined once in docker/image.env, runs commands and flags that exist, points at configs
that exist and validate, exposes nothing publicly and hard-codes no credential."""

from __future__ import annotations

import re
import shlex
import shutil
import string
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from distmarl.cli import build_parser
from distmarl.config import load_config
from tests.jobs.raycluster import ROOT, VENV_BIN

DEPLOY = ROOT / "deploy"
DOCKER = ROOT / "docker"
MANIFESTS = sorted(DEPLOY.rglob("*.yaml"))
IMAGE_WORKDIR = "/home/ray/distmarl"  # docker/Dockerfile's WORKDIR, where the repo is copied


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in (DOCKER / "image.env").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            env[key] = string.Template(value).substitute(env)
    return env


ENV = image_env()


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def kind(name: str) -> list[dict[str, Any]]:
    return [d for p in MANIFESTS for d in docs(p) if d.get("kind") == name]


@cache
def help_text(*command: str) -> str:
    exe = {"ray": str(VENV_BIN / "ray"), "mlflow": str(VENV_BIN / "mlflow"),
           "distmarl": str(VENV_BIN / "distmarl")}[command[0]]
    out = subprocess.run([exe, *command[1:], "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def flags(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


# ------------------------------------------------------------------------------ parsing
def test_every_yaml_in_deploy_parses() -> None:
    assert {p.relative_to(DEPLOY).as_posix() for p in MANIFESTS} == {
        "runtime_env.yaml", "aws/cluster.yaml", "kuberay/base.yaml", "kuberay/mlflow.yaml",
        "kuberay/raycluster.yaml", "kuberay/rayjob.yaml"}
    for path in MANIFESTS:
        assert docs(path), path
    for job in kind("RayJob"):
        assert isinstance(yaml.safe_load(job["spec"]["runtimeEnvYAML"]), dict)


def test_runtime_envs_are_valid_for_ray_and_carry_no_mlflow_settings() -> None:
    from ray.runtime_env import RuntimeEnv

    from distmarl.job_request import load_runtime_env

    env = load_runtime_env(DEPLOY / "runtime_env.yaml")
    RuntimeEnv(**env)
    assert not [k for k in env["env_vars"] if k.startswith("MLFLOW_")]
    for job in kind("RayJob"):
        RuntimeEnv(**yaml.safe_load(job["spec"]["runtimeEnvYAML"]))


def test_aws_cluster_config_validates_against_rays_schema() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = docs(DEPLOY / "aws" / "cluster.yaml")[0]
    filled = prepare_config(cfg)  # what `ray up` does before validating: AWS defaults merged
    validate_config(filled)
    assert set(filled["available_node_types"]) == {"head", "cpu_rollout", "gpu_learner"}
    types = cfg["available_node_types"]
    assert types[cfg["head_node_type"]]["resources"] == {"CPU": 0}
    assert types["gpu_learner"]["node_config"]["InstanceType"].startswith(("g", "p"))
    assert "--gpus all" in types["gpu_learner"]["docker"]["worker_run_options"]
    assert "InstanceType" in types["cpu_rollout"]["node_config"]


KUBERAY_FIELDS = {  # from ray-operator/apis/ray/v1 (KubeRay 1.5/1.6), the parts used here
    "RayClusterSpec": {"rayVersion", "authOptions", "enableInTreeAutoscaling", "headGroupSpec",
                       "workerGroupSpecs", "autoscalerOptions", "suspend"},
    "HeadGroupSpec": {"serviceType", "rayStartParams", "template", "resources", "labels"},
    "WorkerGroupSpec": {"groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams",
                        "template", "resources", "labels", "idleTimeoutSeconds"},
    "RayJobSpec": {"entrypoint", "runtimeEnvYAML", "shutdownAfterJobFinishes",
                   "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit",
                   "rayClusterSpec", "clusterSelector", "submissionMode", "metadata"},
}


def cluster_specs() -> list[dict[str, Any]]:
    return ([c["spec"] for c in kind("RayCluster")]
            + [j["spec"]["rayClusterSpec"] for j in kind("RayJob")])


def test_kuberay_resources_use_known_fields_and_the_images_ray_version() -> None:
    assert len(kind("RayCluster")) == 1 and len(kind("RayJob")) == 1
    for job in kind("RayJob"):
        assert set(job["spec"]) <= KUBERAY_FIELDS["RayJobSpec"]
    for spec in cluster_specs():
        assert set(spec) <= KUBERAY_FIELDS["RayClusterSpec"]
        assert spec["rayVersion"] == ENV["RAY_VERSION"]
        assert set(spec["headGroupSpec"]) <= KUBERAY_FIELDS["HeadGroupSpec"]
        for group in spec["workerGroupSpecs"]:
            assert set(group) <= KUBERAY_FIELDS["WorkerGroupSpec"]
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            for param in group["rayStartParams"]:  # each becomes `ray start --PARAM=VALUE`
                assert f"--{param}" in help_text("ray", "start"), param


def test_raycluster_has_head_cpu_and_gpu_groups() -> None:
    spec = kind("RayCluster")[0]["spec"]
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert set(groups) == {"cpu-rollout", "gpu-learner"}
    gpu = groups["gpu-learner"]["template"]["spec"]["containers"][0]["resources"]
    assert gpu["limits"]["nvidia.com/gpu"] == 1 and gpu["requests"]["nvidia.com/gpu"] == 1
    cpu = groups["cpu-rollout"]["template"]["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in cpu["limits"]


# ------------------------------------------------------------------------------ images
def dicts(node: Any):
    """Every mapping of a parsed YAML tree."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from dicts(v)
    elif isinstance(node, list):
        for v in node:
            yield from dicts(v)


def env_entries() -> list[dict[str, Any]]:
    """Kubernetes env entries ({name, value | valueFrom}) of every manifest."""
    return [d for p in MANIFESTS for doc in docs(p) for d in dicts(doc)
            if "name" in d and ("value" in d or "valueFrom" in d)]


def images() -> list[tuple[str, bool]]:
    """(image, meant for GPU nodes) for every image a manifest names."""
    found = []
    for p in MANIFESTS:
        for doc in docs(p):
            for d in dicts(doc):
                if "image" in d and "resources" in d:  # a Kubernetes container
                    limits = d["resources"].get("limits", {})
                    found.append((d["image"], "nvidia.com/gpu" in limits))
    cfg = docs(DEPLOY / "aws" / "cluster.yaml")[0]
    found.append((cfg["docker"]["image"], False))
    for name, node_type in cfg["available_node_types"].items():
        if "docker" in node_type:
            found.append((node_type["docker"]["worker_image"], name.startswith("gpu")))
    return found


def test_image_names_are_the_ones_defined_in_docker_image_env() -> None:
    found = images()
    assert {image for image, _ in found} == {ENV["CPU_IMAGE"], ENV["CUDA_IMAGE"]}
    for image, gpu in found:
        assert image == (ENV["CUDA_IMAGE"] if gpu else ENV["CPU_IMAGE"]), image
    # every `image:` in deploy/ was seen above (no container or node type was missed)
    named = [m for p in MANIFESTS for m in re.findall(
        r"^[\s-]*(?:image|worker_image|head_image): (\S+)", p.read_text(), re.M)]
    assert sorted(named) == sorted(image for image, _ in found)
    assert ENV["VERSION"] == re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(),
                                       re.M).group(1)
    assert ENV["CPU_IMAGE"] == f"{ENV['IMAGE_REPO']}:{ENV['VERSION']}-cpu"


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", (DOCKER / "Dockerfile").read_text(), re.M))


def test_dockerfile_builds_on_the_matching_ray_image() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    args = dockerfile_args()
    base = re.search(r"^FROM (\S+)$", text, re.M).group(1)
    assert base == "rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-${VARIANT}"
    import ray

    assert args["RAY_VERSION"] == ENV["RAY_VERSION"] == ray.__version__
    assert args["PYTHON_TAG"] == ENV["PYTHON_TAG"] == f"py{sys.version_info[0]}{sys.version_info[1]}"
    setup_torch = re.search(r'DISTMARL_TORCH_VERSION:-([\d.]+)', (ROOT / "scripts" / "setup_env.sh")
                            .read_text()).group(1)
    assert args["TORCH_VERSION"] == ENV["TORCH_VERSION"] == setup_torch
    assert args["VARIANT"] == "cpu" and args["TORCH_INDEX"] == ENV["CPU_TORCH_INDEX"]
    assert 'ray[default]==${RAY_VERSION}' in text  # pip never swaps the base image's Ray


def test_build_script_uses_image_env_and_parses() -> None:
    script = DOCKER / "build.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    for var in ("CPU_IMAGE", "CUDA_IMAGE", "RAY_VERSION", "PYTHON_TAG", "TORCH_VERSION",
                "CPU_TORCH_INDEX", "CUDA_TORCH_INDEX"):
        assert f"${var}" in text or f"${{{var}}}" in text or f'"${var}"' in text, var
    assert "source docker/image.env" in text and "-f docker/Dockerfile" in text


# ------------------------------------------------------------------------------ .dockerignore
def dockerignored(rel: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = "^" + re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*") \
            .replace(r"\*", "[^/]*").replace(r"\?", "[^/]") + "$"
        if any(re.match(regex, p) for p in prefixes):
            ignored = not negate
    return ignored


def copied_sources() -> list[str]:
    text = (DOCKER / "Dockerfile").read_text()
    return [src for line in re.findall(r"^COPY (.+)$", text, re.M)
            for src in [a for a in shlex.split(line) if not a.startswith("--")][:-1]]


def test_dockerignore_admits_what_the_dockerfile_copies_and_nothing_private() -> None:
    sources = copied_sources()
    assert sources == ["pyproject.toml", "README.md", "distmarl", "examples", "deploy/runtime_env.yaml"]
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not dockerignored(src), src
    for kept in ("distmarl/cli.py", "distmarl/runtime/driver/cluster.py",
                 "examples/configs/speaker_listener_maddpg.yaml"):
        assert not dockerignored(kept), kept
    for private in (".venv/bin/python", ".git/config", "runs/x/mlflow.db", "mlruns/0/meta.yaml",
                    "tests/conftest.py", "deploy/kuberay/raycluster.yaml", ".env",
                    "distmarl/__pycache__/cli.cpython-311.pyc", "distmarl.egg-info/PKG-INFO"):
        assert dockerignored(private), private


@pytest.mark.slow
def test_the_docker_context_builds_a_wheel_with_the_cli(tmp_path) -> None:
    """What `pip install .` in the Dockerfile gets: the files .dockerignore lets through."""
    ctx = tmp_path / "ctx"
    for src in copied_sources():
        for f in ([ROOT / src] if (ROOT / src).is_file() else sorted((ROOT / src).rglob("*"))):
            rel = f.relative_to(ROOT).as_posix()
            if f.is_file() and not dockerignored(rel):
                (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, ctx / rel)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-q", "-w", str(tmp_path / "dist"), str(ctx)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    wheel = next((tmp_path / "dist").glob("distmarl-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "distmarl/jobs.py" in names and "distmarl/runtime/driver/cluster.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "distmarl = distmarl.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


# ------------------------------------------------------------------------------ commands
def in_repo(path: str) -> Path:
    """A path inside the image (under the Dockerfile's WORKDIR) -> the same file here."""
    return ROOT / Path(path).relative_to(IMAGE_WORKDIR) if path.startswith(IMAGE_WORKDIR) else ROOT / path


def check_distmarl_command(argv: list[str]) -> None:
    """`distmarl CMD ...` or `python -m distmarl.cli CMD ...`: the command and its flags exist,
    the arguments parse, and a config it names exists and validates."""
    if argv[:3] == ["python", "-m", "distmarl.cli"]:
        argv = ["distmarl", *argv[3:]]
    assert argv[0] == "distmarl", argv
    sub = [a for a in argv[1:3] if not a.startswith("-")]
    cmd = sub[:2] if sub[:1] in (["jobs"], ["config"]) else sub[:1]
    text = help_text("distmarl", *cmd)
    for flag in flags(argv):
        assert flag in text, (argv, flag)
    args = build_parser().parse_args(argv[1:])
    if getattr(args, "config", None):
        config = in_repo(args.config)
        assert config.is_file(), config
        load_config(config, args.set or [])


def test_rayjob_entrypoint_is_a_real_distmarl_command_on_a_config_in_the_image() -> None:
    (job,) = kind("RayJob")
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:4] == ["python", "-m", "distmarl.cli", "train"]
    assert argv[4] == f"{IMAGE_WORKDIR}/examples/configs/speaker_listener_maddpg.yaml"
    check_distmarl_command(argv)
    assert not dockerignored(Path(argv[4]).relative_to(IMAGE_WORKDIR).as_posix())


def shell_commands(command: str) -> list[list[str]]:
    """Simple commands of a shell line, split on ; && || | ( ) &."""
    text = re.sub(r"[;&|()]+", " ;; ", command.replace(">", " > "))
    out, cur = [], []
    for tok in shlex.split(text):
        if tok == ";;":
            out, cur = ([*out, cur] if cur else out), []
        else:
            cur.append(tok)
    return [*out, cur] if cur else out


def test_launcher_commands_use_real_flags_and_bind_to_loopback() -> None:
    cfg = docs(DEPLOY / "aws" / "cluster.yaml")[0]
    seen = set()
    for key in ("head_start_ray_commands", "worker_start_ray_commands", "setup_commands"):
        for line in cfg.get(key) or []:
            for argv in shell_commands(line):
                argv = [a for a in argv if "=" not in a or a.startswith("--")]  # drop VAR=x
                while argv and argv[0] in ("nohup", "ulimit", "-n", "65536"):
                    argv = argv[1:]
                if argv[:2] in (["ray", "start"], ["mlflow", "server"]):
                    seen.add(tuple(argv[:2]))
                    for flag in flags(argv):
                        assert flag in help_text(*argv[:2]), (argv[:2], flag)
                    if argv[:2] == ["mlflow", "server"]:
                        assert "--host" in flags(argv) and "127.0.0.1" in argv
                    elif "--head" in argv:
                        assert "--dashboard-host=127.0.0.1" in argv
    assert seen == {("ray", "start"), ("mlflow", "server")}


def test_mlflow_server_flags_exist_and_jobs_point_at_its_service() -> None:
    (deploy,) = kind("Deployment")
    (svc,) = kind("Service")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    argv = container["command"]
    assert argv[:2] == ["mlflow", "server"]
    for flag in flags(argv):
        assert flag in help_text("mlflow", "server"), flag
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    assert opts["--backend-store-uri"].startswith("sqlite:////mlflow/")
    assert opts["--artifacts-destination"].startswith("/mlflow/")
    mount = container["volumeMounts"][0]
    assert mount["mountPath"] == "/mlflow"
    claim = deploy["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim in {p["metadata"]["name"] for p in kind("PersistentVolumeClaim")}
    host = f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    url = f"http://{host}:{svc['spec']['ports'][0]['port']}"
    uris = [e["value"] for e in env_entries() if e["name"] == "MLFLOW_TRACKING_URI"]
    uris += [yaml.safe_load(j["spec"]["runtimeEnvYAML"])["env_vars"]["MLFLOW_TRACKING_URI"]
             for j in kind("RayJob")]
    assert uris and set(uris) == {url}
    assert f"{host}:{svc['spec']['ports'][0]['port']}" in opts["--allowed-hosts"].split(",")


# ------------------------------------------------------------------------------ exposure, credentials
def test_nothing_is_exposed_publicly() -> None:
    assert not kind("Ingress")
    for svc in kind("Service"):
        assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
    for spec in cluster_specs():
        assert spec["headGroupSpec"]["serviceType"] == "ClusterIP"
        assert spec["authOptions"] == {"mode": "token"}
    (policy,) = kind("NetworkPolicy")
    allowed = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "mlflow"}
    for spec in cluster_specs():  # every Ray pod carries the label the policy admits
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            assert allowed.items() <= group["template"]["metadata"]["labels"].items()


SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|USERNAME|(^|_)KEY($|_)|CREDENTIAL", re.I)


def test_no_credentials_are_hard_coded() -> None:
    files = [*MANIFESTS, *DOCKER.iterdir(), ROOT / ".dockerignore", DEPLOY / "README.md"]
    for f in files:
        text = f.read_text()
        assert not re.search(r"AKIA[0-9A-Z]{16}", text), f
        assert not re.search(r"://[^/\s:@'\"]+:[^/\s@'\"]+@", text), f  # user:password@host
        assert not re.search(r"(?im)^\s*(aws_secret_access_key|password|token)\s*[:=]\s*\S", text), f
    for entry in env_entries():  # credentials come from Secrets, never as literal values
        if SECRET_NAME.search(entry["name"]):
            assert "value" not in entry and "secretKeyRef" in entry["valueFrom"], entry
    for f in MANIFESTS:
        for d in (d for doc in docs(f) for d in dicts(doc)):
            for key, value in d.items():
                if re.fullmatch(r"[A-Z][A-Z0-9_]*", str(key)) and SECRET_NAME.search(key):
                    raise AssertionError(f"{f.name}: literal {key}: {value!r}")
    for job in kind("RayJob"):
        env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
        assert not [k for k in env if SECRET_NAME.search(k)]


def test_readme_commands_exist() -> None:
    """Every `distmarl ...` line in deploy/README.md's shell blocks parses with real flags and
    names configs that exist; every repo path it mentions exists."""
    text = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines, cur = [], ""
    for block in blocks:
        for raw in block.splitlines():
            cur += raw.rstrip("\\").strip() + " "
            if not raw.endswith("\\"):
                lines.append(cur.strip())
                cur = ""
    commands = []
    for line in lines:
        line = re.sub(r"<[^>\s]+>", "X", line.split(" #")[0])  # placeholders: <ID>
        for argv in shell_commands(line):
            argv = [a for a in argv if not re.match(r"^[A-Z_]+=", a)]
            if (argv and argv[0].endswith("distmarl")) or argv[:3] == ["python", "-m", "distmarl.cli"]:
                commands.append(["distmarl", *argv[1:]] if argv[0].endswith("distmarl") else argv)
    used = {tuple(c[1:3]) if c[1] == "jobs" else (c[1],) for c in commands
            if c[0] == "distmarl"}
    assert {("submit",), ("jobs", "list"), ("jobs", "status"), ("jobs", "logs"),
            ("jobs", "stop"), ("train",)} <= used
    for argv in commands:  # $VAR stands for any value
        check_distmarl_command([re.sub(r"\$\{?\w+\}?", "X", a) for a in argv])
    for rel in set(re.findall(r"\b((?:deploy|docker|examples|scripts)/[\w./-]+\.(?:yaml|sh|env))", text)):
        assert (ROOT / rel).is_file(), rel


def test_every_volume_claim_exists_and_is_writable_by_the_image_user() -> None:
    claims = {p["metadata"]["name"] for p in kind("PersistentVolumeClaim")}
    pods = [d for p in MANIFESTS for doc in docs(p) for d in dicts(doc) if "containers" in d]
    mounted = 0
    for pod in pods:
        for volume in pod.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                mounted += 1
                assert volume["persistentVolumeClaim"]["claimName"] in claims, volume
                assert pod["securityContext"]["fsGroup"] == 100  # group `users` of user `ray`
    assert mounted == 3  # MLflow's store, the RayCluster head's and the RayJob head's runs
