"""What ``distmarl submit`` sends, built and checked locally before anything talks to a cluster.

How a submission travels (deploy/README.md has the whole picture):

- **The config** is validated here (``load_config``: a bad field exits 2 before anything is
  sent), resolved (``--set`` applied) and written as ``_distmarl_job.yaml`` at the top of the
  job's ``working_dir`` upload. The upload is a staging folder holding that file plus links to
  every entry of ``--working-dir`` (nothing is copied). The job runs
  ``python -m distmarl.cli train _distmarl_job.yaml --quiet`` in the unpacked working dir.
- **The run is kept.** A relative ``tracking.directory`` would put the run directory inside
  the job's working-dir upload, Ray's cache, which Ray deletes when it fills (and KubeRay with
  the head pod). So a config that leaves it out or gives a relative one gets :data:`JOB_RUNS`
  (a folder in the home of the head's user) instead, said before the job is sent;
  ``tracking.storage`` keeps the run on shared or object storage besides.
- **The MLflow URI and credentials** (``MLFLOW_TRACKING_URI``, ``..._USERNAME``,
  ``..._PASSWORD``, ``..._TOKEN``) travel only as ``runtime_env.env_vars``: never in the
  entrypoint, the job metadata or the shipped config (``tracking.mlflow_uri`` is moved out of
  it, since the run logs its config as MLflow params), and every echo masks them.
- **The Ray token** of a token-protected job server is found as ``distmarl.job_auth`` says.

:mod:`distmarl.jobs` sends the :class:`JobRequest` built here and follows the job.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distmarl.config import ConfigError, load_config
from distmarl.version import __version__

#: The file name of the shipped config, at the top of the job's working dir.
JOB_CONFIG = "_distmarl_job.yaml"
#: Where a submitted run's directory goes when the config does not say (on the head)
JOB_RUNS = "~/distmarl-runs"
MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
              "MLFLOW_TRACKING_TOKEN")
HIDDEN = "<hidden>"
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|CREDENTIAL|AUTH|(^|_)KEY($|_)", re.I)
_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s]+@", re.I)


# ---------------------------------------------------------------------------------- masking
def is_secret(name: str, value: Any = "") -> bool:
    """Whether a variable is credential-like: an MLflow variable, a secret-sounding name, or a
    URL carrying a user (and perhaps a password)."""
    return (name in MLFLOW_ENV or bool(_SECRET_NAME.search(name))
            or bool(_USERINFO.match(str(value))))


def mask_env(env_vars: Mapping[str, Any] | None) -> dict[str, Any]:
    """``env_vars`` with the value of every credential-like variable replaced by ``<hidden>``."""
    return {k: HIDDEN if is_secret(k, v) else v for k, v in (env_vars or {}).items()}


def masked_runtime_env(runtime_env: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``runtime_env`` with its ``env_vars`` masked (:func:`mask_env`)."""
    out = dict(runtime_env or {})
    if "env_vars" in out:
        out["env_vars"] = mask_env(out["env_vars"])
    return out


# ---------------------------------------------------------------------------------- the request
@dataclass
class JobRequest:
    """Everything one submission sends. ``runtime_env`` has no ``working_dir`` yet: the staging
    folder (the config plus ``working_dir``'s entries) is made by :func:`staged_working_dir`."""

    name: str
    entrypoint: str
    config_yaml: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    submission_id: str
    working_dir: Path | None = None
    env_sources: dict[str, str] = field(default_factory=dict)  # env var -> where it came from
    #: where the run will be kept, and any warning about it (a line each)
    keeping: list[str] = field(default_factory=list)


def load_runtime_env(path: str | Path | None) -> dict[str, Any]:
    """A runtime_env YAML (or JSON) file as a dict; ``{}`` for None."""
    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--runtime-env {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"--runtime-env {p} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--runtime-env {p} must hold a mapping (working_dir, env_vars, ...)")
    env_vars = data.get("env_vars") or {}
    if not isinstance(env_vars, dict):
        raise ConfigError(f"--runtime-env {p}: env_vars must be a mapping of names to strings")
    data["env_vars"] = {str(k): str(v) for k, v in env_vars.items()}
    return data


def mlflow_env(*, mlflow_uri: str | None, config_uri: str | None, file_env: Mapping[str, str],
               environ: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """The MLflow variables the job gets, and where each came from.

    Explicit beats ambient: ``--mlflow-uri``, then the config's ``tracking.mlflow_uri``, then the
    runtime_env file's ``env_vars``, then this shell's environment (``environ``; None: not
    forwarded, the cluster's own environment decides).
    """
    env: dict[str, str] = {}
    source: dict[str, str] = {}
    for name in MLFLOW_ENV:
        if environ is not None and environ.get(name):
            env[name], source[name] = environ[name], "this shell's environment"
        if file_env.get(name):
            env[name], source[name] = file_env[name], "--runtime-env env_vars"
    if config_uri:
        env["MLFLOW_TRACKING_URI"], source["MLFLOW_TRACKING_URI"] = config_uri, "tracking.mlflow_uri"
    if mlflow_uri:
        env["MLFLOW_TRACKING_URI"], source["MLFLOW_TRACKING_URI"] = mlflow_uri, "--mlflow-uri"
    return env, source


def entrypoint(python: str = "python", sweep: Sequence[str] = ()) -> str:
    """The job's command: plain arguments only (no secrets, no overrides: they are in the
    file). ``sweep``: ``distmarl sweep``'s arguments (seeds, grid, folder) for a sweep job."""
    if sweep:
        return f"{python} -m distmarl.cli sweep {JOB_CONFIG} {shlex.join(sweep)}"
    return f"{python} -m distmarl.cli train {JOB_CONFIG} --quiet"


def new_submission_id(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "run"
    return f"distmarl-{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def local_working_dir(wd: str | Path | None) -> Path | None:
    """``--working-dir`` (or the runtime_env file's ``working_dir``) as an existing local
    folder: the config is added to it, so a remote package cannot be one."""
    if wd is None:
        return None
    if "://" in str(wd):
        raise ConfigError(f"working_dir {wd}: distmarl submit adds the config to the working "
                          "dir, so it must be a local folder (ship remote packages with "
                          "py_modules or bake them into the image)")
    path = Path(wd).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"--working-dir {path} is not a folder")
    return path


def prepare_submission(config: str | Path, overrides: Sequence[str] = (), *,
                       working_dir: str | Path | None = None,
                       runtime_env_file: str | Path | None = None,
                       mlflow_uri: str | None = None, forward_mlflow_env: bool = True,
                       submission_id: str | None = None,
                       environ: Mapping[str, str] = os.environ,
                       sweep: Sequence[str] = ()) -> JobRequest:
    """Validate the config locally and build the job: raises ``ConfigError`` (exit 2) on a bad
    config, runtime env file or working dir, before anything talks to the cluster.
    ``sweep``: the job is ``distmarl sweep`` with these arguments (checked by the caller;
    without ``--out`` the sweep's folder is ``<tracking.directory>/sweeps/<name>`` on the
    head), else ``distmarl train``."""
    cfg = load_config(config, overrides)
    runtime_env = load_runtime_env(runtime_env_file)
    file_env = runtime_env.get("env_vars", {})
    env, sources = mlflow_env(mlflow_uri=mlflow_uri, config_uri=cfg.tracking.mlflow_uri,
                              file_env=file_env, environ=environ if forward_mlflow_env else None)
    cfg.tracking.mlflow_uri = None  # travels as MLFLOW_TRACKING_URI only
    keeping = kept_runs(cfg.tracking)
    if sweep:  # its runs go into its folder
        sweep = list(sweep)
        if "--out" not in sweep:
            sweep += ["--out", f"{cfg.tracking.directory}/sweeps/{cfg.name}"]
        keeping = [f"sweep folder: {sweep[sweep.index('--out') + 1]} on the head"]
    runtime_env["env_vars"] = {**file_env, **env}
    if not runtime_env["env_vars"]:
        del runtime_env["env_vars"]
    file_wd = runtime_env.pop("working_dir", None)
    wd_path = local_working_dir(working_dir if working_dir is not None else file_wd)

    config_yaml = (f"# {Path(config).name} as resolved by `distmarl submit` "
                   f"(distmarl {__version__}); tracking.mlflow_uri travels as MLFLOW_TRACKING_URI\n"
                   + cfg.to_yaml())
    return JobRequest(
        name=cfg.name, entrypoint=entrypoint(sweep=sweep), config_yaml=config_yaml, runtime_env=runtime_env,
        metadata={"distmarl.config": Path(config).name, "distmarl.name": cfg.name,
                  "distmarl.version": __version__,
                  "distmarl.config_sha256": hashlib.sha256(config_yaml.encode()).hexdigest()[:16]},
        submission_id=submission_id or new_submission_id(cfg.name),
        working_dir=wd_path, env_sources=sources, keeping=keeping)


def kept_runs(tracking: Any) -> list[str]:
    """Where a submitted run is kept, said in a line; ``tracking.directory`` set to
    :data:`JOB_RUNS` where the config leaves it out or gives a relative one (which would be
    inside the job's working-dir upload, deleted with Ray's cache)."""
    storage = f"; kept at {tracking.storage}/<run>" if tracking.storage else ""
    directory = str(tracking.directory)
    if Path(directory).is_absolute() or directory.startswith("~"):
        return [f"run directory: {directory}/<run> on the head{storage}"]
    why = ("" if "directory" not in tracking.model_fields_set else
           f"; tracking.directory {directory!r} would be inside the job's working-dir upload, "
           "which Ray deletes")
    tracking.directory = JOB_RUNS
    return [f"run directory: {JOB_RUNS}/<run> on the head{why}{storage}"]


@contextmanager
def staged_working_dir(request: JobRequest) -> Iterator[Path]:
    """A temporary folder to upload as the job's working_dir: the resolved config plus links to
    every top-level entry of ``request.working_dir`` (Ray follows the links while packing).

    Top-level ``.gitignore`` / ``.rayignore`` are copied with a ``!/_distmarl_job.yaml`` line
    added, so ignore rules such as ``*.yaml`` never drop the config from the upload.
    """
    keep = f"\n!/{JOB_CONFIG}\n"
    with tempfile.TemporaryDirectory(prefix="distmarl-job-") as tmp:
        root = Path(tmp) / "working_dir"
        root.mkdir()
        if request.working_dir is not None:
            for entry in sorted(request.working_dir.iterdir()):
                if entry.name == JOB_CONFIG:
                    print(f"distmarl: {entry} is replaced by the submitted config", file=sys.stderr)
                elif entry.name in (".gitignore", ".rayignore") and entry.is_file():
                    (root / entry.name).write_text(entry.read_text() + keep)
                else:
                    (root / entry.name).symlink_to(entry)
        (root / JOB_CONFIG).write_text(request.config_yaml)
        yield root


def upload_runtime_env(request: JobRequest, staged: Path) -> dict[str, Any]:
    env = {**request.runtime_env, "working_dir": str(staged)}
    if env.get("excludes"):
        env["excludes"] = [*env["excludes"], f"!/{JOB_CONFIG}"]
    return env


def describe(request: JobRequest, address: str) -> str:
    """What is about to be sent, credentials masked."""
    shown = masked_runtime_env(request.runtime_env)
    shown["working_dir"] = (f"<{JOB_CONFIG}" + (f" + {request.working_dir}>" if request.working_dir
                                                else ">"))
    lines = [f"distmarl: submitting '{request.name}' to {address} as {request.submission_id}",
             f"  entrypoint:  {request.entrypoint}",
             f"  runtime_env: {json.dumps(shown, sort_keys=True)}"]
    lines += [f"  {line}" for line in request.keeping]
    if request.env_sources:
        lines.append("  mlflow:      " + ", ".join(f"{k} from {v}" for k, v in
                                                    sorted(request.env_sources.items()))
                     + " (values hidden)")
    return "\n".join(lines)
