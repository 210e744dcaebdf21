"""distmarl.jobs without a cluster: what a submission carries, what is masked, how a job's end is
reported, and what Ray's own packer uploads from the staged working dir. Seconds, no Ray."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from distmarl import job_request, jobs
from distmarl.cli import main
from distmarl.config import ConfigError
from tests.jobs.raycluster import ROOT, free_port

TINY = ROOT / "examples" / "configs" / "tiny.yaml"
URI = "https://bob:hunter2@mlflow.example.com"


def prepare(*sets: str, **kw):
    kw.setdefault("environ", {})
    return job_request.prepare_submission(TINY, list(sets), **kw)


# ------------------------------------------------------------------------------ the request
def test_config_uri_moves_to_the_env_and_out_of_the_shipped_config() -> None:
    req = prepare(f"tracking.mlflow_uri={URI}", "training.max_steps_per_member=123")
    assert req.runtime_env["env_vars"] == {"MLFLOW_TRACKING_URI": URI}
    assert req.env_sources == {"MLFLOW_TRACKING_URI": "tracking.mlflow_uri"}
    shipped = yaml.safe_load(req.config_yaml)
    assert shipped["tracking"]["mlflow_uri"] is None
    assert shipped["training"]["max_steps_per_member"] == 123  # overrides travel inside it
    assert "hunter2" not in req.config_yaml + req.entrypoint + str(req.metadata)
    assert req.entrypoint == "python -m distmarl.cli train _distmarl_job.yaml --quiet"
    assert req.metadata["distmarl.name"] == "tiny" and req.submission_id.startswith("distmarl-tiny-")


def test_mlflow_env_precedence_flag_config_file_shell(tmp_path) -> None:
    env_file = tmp_path / "env.yaml"
    env_file.write_text("env_vars:\n  MLFLOW_TRACKING_URI: http://file\n"
                        "  MLFLOW_TRACKING_TOKEN: file-token\n  OTHER: 1\n")
    shell = {"MLFLOW_TRACKING_URI": "http://shell", "MLFLOW_TRACKING_TOKEN": "shell-token",
             "MLFLOW_TRACKING_USERNAME": "shell-user", "HOME": "/root"}
    req = prepare(runtime_env_file=env_file, environ=shell)
    assert req.runtime_env["env_vars"] == {
        "MLFLOW_TRACKING_URI": "http://file", "MLFLOW_TRACKING_TOKEN": "file-token",
        "MLFLOW_TRACKING_USERNAME": "shell-user", "OTHER": "1"}
    req = prepare("tracking.mlflow_uri=http://config", runtime_env_file=env_file, environ=shell)
    assert req.runtime_env["env_vars"]["MLFLOW_TRACKING_URI"] == "http://config"
    req = prepare("tracking.mlflow_uri=http://config", runtime_env_file=env_file, environ=shell,
                  mlflow_uri="http://flag")
    assert req.runtime_env["env_vars"]["MLFLOW_TRACKING_URI"] == "http://flag"
    assert req.env_sources["MLFLOW_TRACKING_URI"] == "--mlflow-uri"
    req = prepare(environ=shell, forward_mlflow_env=False)
    assert "env_vars" not in req.runtime_env and req.env_sources == {}


def test_bad_inputs_are_config_errors_naming_what_is_wrong(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"population.size: Input should be greater"):
        prepare("population.size=0")
    with pytest.raises(ConfigError, match="must be a local folder"):
        prepare(working_dir="s3://bucket/code.zip")
    with pytest.raises(ConfigError, match="is not a folder"):
        prepare(working_dir=tmp_path / "missing")
    bad = tmp_path / "env.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        prepare(runtime_env_file=bad)


def test_submit_with_a_bad_field_exits_2_before_contacting_anything(capsys) -> None:
    unused = f"http://127.0.0.1:{free_port()}"
    code = main(["submit", str(TINY), "--address", unused, "--set", "buffer.capacity=-5"])
    err = capsys.readouterr().err
    assert code == 2
    assert "buffer.capacity" in err and "Ray job server" not in err


def test_submit_to_a_server_that_is_not_there_exits_4(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the token lookup never sees the user's ~/.ray
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    unused = f"http://127.0.0.1:{free_port()}"
    code = main(["submit", str(TINY), "--address", unused, "--no-mlflow-env"])
    assert code == jobs.EXIT_UNREACHABLE
    assert f"distmarl: Ray job server {unused}:" in capsys.readouterr().err


def test_default_address_like_ray_job() -> None:
    assert jobs.default_address({}) == "http://127.0.0.1:8265"
    assert jobs.default_address({"RAY_ADDRESS": "http://a:1"}) == "http://a:1"
    assert jobs.default_address({"RAY_ADDRESS": "http://a:1",
                                 "RAY_API_SERVER_ADDRESS": "http://b:2"}) == "http://b:2"


# ------------------------------------------------------------------------------ masking
def test_masking_hides_credentials_and_uris_with_userinfo() -> None:
    env = {"MLFLOW_TRACKING_URI": "http://plain:5000", "MLFLOW_TRACKING_PASSWORD": "x",
           "AWS_SECRET_ACCESS_KEY": "y", "API_KEY": "z", "DB_URL": URI, "OMP_NUM_THREADS": "1"}
    assert job_request.mask_env(env) == {
        "MLFLOW_TRACKING_URI": "<hidden>", "MLFLOW_TRACKING_PASSWORD": "<hidden>",
        "AWS_SECRET_ACCESS_KEY": "<hidden>", "API_KEY": "<hidden>", "DB_URL": "<hidden>",
        "OMP_NUM_THREADS": "1"}
    req = prepare(mlflow_uri=URI, environ={"MLFLOW_TRACKING_PASSWORD": "pw-42"})
    text = job_request.describe(req, "http://h:8265")
    assert "hunter2" not in text and "pw-42" not in text and "bob" not in text
    assert "MLFLOW_TRACKING_PASSWORD from this shell's environment" in text


# ------------------------------------------------------------------------------ the upload
def packed(root: Path, excludes: list[str], tmp_path: Path) -> set[str]:
    """The file names Ray's own packer puts in the working_dir upload (a private helper of
    ray._private.runtime_env.packaging, used here only to see exactly what would travel)."""
    from ray._private.runtime_env.packaging import _zip_files

    out = tmp_path / "pkg.zip"
    _zip_files(str(root), excludes, str(out), include_gitignore=True)
    return set(zipfile.ZipFile(out).namelist())


def test_staged_working_dir_keeps_the_config_despite_ignore_rules(tmp_path) -> None:
    user = tmp_path / "code"
    (user / "pkg").mkdir(parents=True)
    (user / "pkg" / "envs.py").write_text("X = 1\n")
    (user / "settings.yaml").write_text("a: 1\n")
    (user / "runs").mkdir()
    (user / "runs" / "big.ckpt").write_text("0" * 100)
    (user / ".gitignore").write_text("*.yaml\n")
    req = prepare(working_dir=user,
                  runtime_env_file=ROOT / "deploy" / "runtime_env.yaml")
    with job_request.staged_working_dir(req) as staged:
        env = job_request.upload_runtime_env(req, staged)
        names = packed(staged, env["excludes"], tmp_path)
        assert Path(env["working_dir"]) == staged
    assert not staged.exists()  # removed once submitted
    assert "_distmarl_job.yaml" in names and "pkg/envs.py" in names
    assert "settings.yaml" not in names          # the user's .gitignore still applies
    assert not any(n.startswith("runs/") for n in names)  # deploy/runtime_env.yaml excludes
    assert (user / ".gitignore").read_text() == "*.yaml\n"  # the user's files are untouched


def test_without_working_dir_only_the_config_travels(tmp_path) -> None:
    req = prepare()
    with job_request.staged_working_dir(req) as staged:
        assert packed(staged, [], tmp_path) == {"_distmarl_job.yaml"}
        assert (staged / "_distmarl_job.yaml").read_text() == req.config_yaml


# ------------------------------------------------------------------------------ following a job
class FakeClient:
    def __init__(self, statuses, logs="", message=None, tail=None, tail_breaks=False):
        self.statuses = list(statuses)
        self.logs = logs
        self.message = message
        self.tail = tail if tail is not None else [logs]
        self.tail_breaks = tail_breaks
        self.submitted = None

    def submit_job(self, **kw):
        self.submitted = kw
        assert Path(kw["runtime_env"]["working_dir"], "_distmarl_job.yaml").exists()
        return kw["submission_id"]

    def get_job_status(self, job_id):
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def get_job_info(self, job_id):
        return SimpleNamespace(status=self.statuses[-1], message=self.message, error_type=None,
                               entrypoint="python -m distmarl.cli train _distmarl_job.yaml",
                               submission_id=job_id, job_id="02000000", start_time=1e12,
                               end_time=None, metadata={},
                               runtime_env={"env_vars": {"MLFLOW_TRACKING_PASSWORD": "pw"}})

    def get_job_logs(self, job_id):
        return self.logs

    async def tail_job_logs(self, job_id):
        for chunk in self.tail:
            yield chunk
        if self.tail_breaks:
            raise RuntimeError("connection closed")

    def list_jobs(self):
        return [self.get_job_info("job-1")]

    def stop_job(self, job_id):
        return True


def run(client, **kw):
    out, err = io.StringIO(), io.StringIO()
    code = jobs.run_submit(client, prepare(submission_id="job-1"),
                           address="http://h:8265", out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def test_success_exits_0_and_streams_the_logs() -> None:
    client = FakeClient(["RUNNING", "SUCCEEDED"], logs="step 1\ndistmarl: max_steps after 8\n")
    code, out, err = run(client)
    assert code == 0 and out == "step 1\ndistmarl: max_steps after 8\n"
    assert err.strip().endswith("distmarl: job job-1 SUCCEEDED")
    assert client.submitted["metadata"]["distmarl.name"] == "tiny"


def test_failure_exits_1_with_ray_message_and_the_jobs_own_error() -> None:
    logs = "Traceback...\ndistmarl: env.spec 'nope:env': No module named 'nope'\n"
    msg = ("Job entrypoint command failed with exit code 2, last available logs "
           "(truncated to 20,000 chars):\n" + logs)
    code, _, err = run(FakeClient(["FAILED"], logs=logs, message=msg))
    assert code == jobs.EXIT_FAILED
    assert err.strip().splitlines()[-1] == (
        "distmarl: job job-1 FAILED: Job entrypoint command failed with exit code 2 "
        "distmarl: env.spec 'nope:env': No module named 'nope'")


def test_stopped_exits_3() -> None:
    code, _, err = run(FakeClient(["STOPPED"], message="Job was intentionally stopped."))
    assert code == jobs.EXIT_STOPPED
    assert "job-1 STOPPED: Job was intentionally stopped." in err


def test_a_broken_log_stream_falls_back_to_polling_without_repeating() -> None:
    client = FakeClient(["RUNNING", "RUNNING", "SUCCEEDED"], logs="a\nb\nc\n", tail=["a\n"],
                        tail_breaks=True)
    code, out, err = run(client)
    assert code == 0 and out == "a\nb\nc\n"
    assert "log stream of job-1 broke" in err


def test_no_wait_returns_at_once_with_the_follow_command() -> None:
    code, out, err = run(FakeClient(["PENDING"]), wait=False)
    assert code == 0 and out == ""
    assert "distmarl jobs logs job-1 --follow --address http://h:8265" in err


def test_status_and_list_mask_the_runtime_env() -> None:
    out = io.StringIO()
    jobs.job_status(FakeClient(["RUNNING"]), "job-1", as_json=True, out=out)
    assert '"MLFLOW_TRACKING_PASSWORD": "<hidden>"' in out.getvalue()
    assert '"pw"' not in out.getvalue()
    out = io.StringIO()
    jobs.list_jobs(FakeClient(["RUNNING"]), out=out)
    header, row = out.getvalue().splitlines()
    assert header.split() == ["ID", "STATUS", "STARTED", "ENTRYPOINT"]
    assert row.split()[:2] == ["job-1", "RUNNING"] and "pw" not in row


def test_a_submitted_run_is_kept_outside_the_jobs_upload(tmp_path) -> None:
    """Left out or relative, ``tracking.directory`` becomes ~/distmarl-runs on the head (said
    before the job is sent); an absolute one and the storage stay as they are."""
    def shipped(*sets: str) -> tuple[dict, list[str]]:
        request = job_request.prepare_submission(TINY, list(sets), environ={})
        return yaml.safe_load(request.config_yaml)["tracking"], request.keeping

    tracking, keeping = shipped()  # tiny.yaml says `directory: runs`
    assert tracking["directory"] == "~/distmarl-runs"
    assert keeping == ["run directory: ~/distmarl-runs/<run> on the head; tracking.directory "
                       "'runs' would be inside the job's working-dir upload, which Ray deletes"]
    tracking, keeping = shipped(f"tracking.directory={tmp_path}", "tracking.storage=s3://b/r")
    assert tracking["directory"] == str(tmp_path) and tracking["storage"] == "s3://b/r"
    assert keeping == [f"run directory: {tmp_path}/<run> on the head; kept at s3://b/r/<run>"]


def test_a_run_directory_inside_a_jobs_upload_is_warned_of(tmp_path) -> None:
    from distmarl.config import load_config
    from distmarl.runtime.driver.trainer import EphemeralRunWarning, _checked_run_dir

    upload = tmp_path / "runtime_resources" / "working_dir_files" / "_ray_pkg_1" / "runs"
    cfg = load_config(TINY, [f"tracking.directory={upload}"])
    with pytest.warns(EphemeralRunWarning, match="tracking.directory to an absolute folder"):
        _checked_run_dir(cfg, None, None)
