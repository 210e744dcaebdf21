"""Ray Jobs for distmarl: submit ``distmarl train`` to a cluster, follow it, list, inspect, stop.

How a submission travels (deploy/README.md has the whole picture):

- **The config** is validated here (``load_config``: a bad field exits 2 before anything is
  sent), resolved (``--set`` applied) and written as ``_distmarl_job.yaml`` at the top of the
  job's ``working_dir`` upload. The upload is a staging folder holding that file plus links to
  every entry of ``--working-dir`` (nothing is copied). The job runs
  ``python -m distmarl.cli train _distmarl_job.yaml --quiet`` in the unpacked working dir,
  so a relative ``tracking.directory`` puts the run directory under the job's working dir.
- **The MLflow URI and credentials** (``MLFLOW_TRACKING_URI``, ``..._USERNAME``,
  ``..._PASSWORD``, ``..._TOKEN``) travel only as ``runtime_env.env_vars``: never in the
  entrypoint, the job metadata or the shipped config (``tracking.mlflow_uri`` is moved out of
  it, since the run logs its config as MLflow params), and every echo masks them.
- **The Ray token** of a token-protected job server is found as ``distmarl.job_auth`` says.

This module imports no Ray: ``distmarl.cli`` builds the ``JobSubmissionClient`` and passes it
in, so only ``distmarl.runtime`` and the CLI import ray (an import-linter contract in
``pyproject.toml`` says so).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from distmarl.config import ConfigError, load_config
from distmarl.version import __version__

#: The file name of the shipped config, at the top of the job's working dir.
JOB_CONFIG = "_distmarl_job.yaml"
DEFAULT_ADDRESS = "http://127.0.0.1:8265"
MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
              "MLFLOW_TRACKING_TOKEN")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")

#: Exit codes of ``distmarl submit`` / ``distmarl jobs``: 2 (a config or usage error) is the
#: CLI's own; a job that SUCCEEDED exits 0.
EXIT_FAILED = 1
EXIT_STOPPED = 3
EXIT_UNREACHABLE = 4
EXIT_INTERRUPTED = 130

HIDDEN = "<hidden>"
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|CREDENTIAL|AUTH|(^|_)KEY($|_)", re.I)
_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s]+@", re.I)


def default_address(environ: Mapping[str, str] = os.environ) -> str:
    """Like ``ray job``: ``$RAY_API_SERVER_ADDRESS``, then ``$RAY_ADDRESS``, then the local head."""
    return (environ.get("RAY_API_SERVER_ADDRESS") or environ.get("RAY_ADDRESS")
            or DEFAULT_ADDRESS)


# ---------------------------------------------------------------------------------- masking
def is_secret(name: str, value: Any = "") -> bool:
    return (name in MLFLOW_ENV or bool(_SECRET_NAME.search(name))
            or bool(_USERINFO.match(str(value))))


def mask_env(env_vars: Mapping[str, Any] | None) -> dict[str, Any]:
    """``env_vars`` with the value of every credential-like variable replaced by ``<hidden>``."""
    return {k: HIDDEN if is_secret(k, v) else v for k, v in (env_vars or {}).items()}


def masked_runtime_env(runtime_env: Mapping[str, Any] | None) -> dict[str, Any]:
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


def entrypoint(python: str = "python") -> str:
    """The job's command: plain arguments only (no secrets, no overrides: they are in the file)."""
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
                       environ: Mapping[str, str] = os.environ) -> JobRequest:
    """Validate the config locally and build the job: raises ``ConfigError`` (exit 2) on a bad
    config, runtime env file or working dir, before anything talks to the cluster."""
    cfg = load_config(config, overrides)
    runtime_env = load_runtime_env(runtime_env_file)
    file_env = runtime_env.get("env_vars", {})
    env, sources = mlflow_env(mlflow_uri=mlflow_uri, config_uri=cfg.tracking.mlflow_uri,
                              file_env=file_env, environ=environ if forward_mlflow_env else None)
    cfg.tracking.mlflow_uri = None  # travels as MLFLOW_TRACKING_URI only
    runtime_env["env_vars"] = {**file_env, **env}
    if not runtime_env["env_vars"]:
        del runtime_env["env_vars"]
    file_wd = runtime_env.pop("working_dir", None)
    wd_path = local_working_dir(working_dir if working_dir is not None else file_wd)

    config_yaml = (f"# {Path(config).name} as resolved by `distmarl submit` "
                   f"(distmarl {__version__}); tracking.mlflow_uri travels as MLFLOW_TRACKING_URI\n"
                   + cfg.to_yaml())
    return JobRequest(
        name=cfg.name, entrypoint=entrypoint(), config_yaml=config_yaml, runtime_env=runtime_env,
        metadata={"distmarl.config": Path(config).name, "distmarl.name": cfg.name,
                  "distmarl.version": __version__,
                  "distmarl.config_sha256": hashlib.sha256(config_yaml.encode()).hexdigest()[:16]},
        submission_id=submission_id or new_submission_id(cfg.name),
        working_dir=wd_path, env_sources=sources)


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
    if request.env_sources:
        lines.append("  mlflow:      " + ", ".join(f"{k} from {v}" for k, v in
                                                    sorted(request.env_sources.items()))
                     + " (values hidden)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- talking to the cluster
def submit(client: Any, request: JobRequest, *, address: str, err: IO[str] = sys.stderr) -> str:
    """Stage the working dir, submit, return the submission id (the upload happens in here)."""
    print(describe(request, address), file=err, flush=True)
    with staged_working_dir(request) as staged:
        return client.submit_job(entrypoint=request.entrypoint,
                                 runtime_env=upload_runtime_env(request, staged),
                                 metadata=request.metadata,
                                 submission_id=request.submission_id)


def status_name(status: Any) -> str:
    return str(getattr(status, "value", status))


def wait_terminal(client: Any, job_id: str, poll_s: float = 1.0,
                  timeout_s: float | None = None) -> str:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = status_name(client.get_job_status(job_id))
        if status in TERMINAL:
            return status
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is still {status} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def follow(client: Any, job_id: str, out: IO[str] = sys.stdout,
           err: IO[str] = sys.stderr) -> str:
    """Stream the job's logs to ``out`` until it ends; returns its final status. If the log
    stream breaks, polls the status instead and prints what the stream missed at the end."""
    written = 0

    async def tail() -> None:
        nonlocal written
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()
            written += len(chunk)

    try:
        asyncio.run(tail())
    except Exception as error:  # any broken stream, whatever Ray raises: fall back to polling
        print(f"distmarl: log stream of {job_id} broke ({error}); waiting for the job", file=err)
        status = wait_terminal(client, job_id)
        out.write(client.get_job_logs(job_id)[written:])
        out.flush()
        return status
    return wait_terminal(client, job_id, poll_s=0.5)


def failure_reason(info: Any, logs: str = "") -> str:
    """One line: Ray's message without its copy of the logs, plus the job's own last error."""
    message = (getattr(info, "message", None) or "").strip().splitlines()
    reason = message[0].split(", last available logs")[0].rstrip(":") if message else ""
    lines = [ln.strip() for ln in logs.splitlines() if ln.strip()]
    cause = next((ln for ln in reversed(lines) if ln.startswith("distmarl: ")), None)
    if cause is None:
        cause = next((ln for ln in reversed(lines)
                      if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b", ln)), None)
    error_type = getattr(info, "error_type", None)
    parts = [p for p in (reason, f"[{error_type}]" if error_type else "", cause) if p]
    return " ".join(parts) if parts else "no message"


def outcome(client: Any, job_id: str, status: str, err: IO[str] = sys.stderr) -> int:
    """Print how the job ended; returns the exit code (0, EXIT_FAILED or EXIT_STOPPED)."""
    if status == "SUCCEEDED":
        print(f"distmarl: job {job_id} SUCCEEDED", file=err)
        return 0
    info = client.get_job_info(job_id)
    try:
        logs = client.get_job_logs(job_id)
    except RuntimeError:
        logs = ""
    print(f"distmarl: job {job_id} {status}: {failure_reason(info, logs)}", file=err)
    return EXIT_STOPPED if status == "STOPPED" else EXIT_FAILED


def run_submit(client: Any, request: JobRequest, *, address: str, wait: bool = True,
               out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    """Submit ``request`` and, with ``wait``, follow it to its end; returns the exit code."""
    job_id = submit(client, request, address=address, err=err)
    print(f"distmarl: submitted {job_id}", file=err, flush=True)
    if not wait:
        print(f"  follow: distmarl jobs logs {job_id} --follow --address {address}\n"
              f"  stop:   distmarl jobs stop {job_id} --address {address}", file=err)
        return 0
    try:
        status = follow(client, job_id, out, err)
    except KeyboardInterrupt:
        print(f"\ndistmarl: stopped following; job {job_id} goes on. Stop it with "
              f"`distmarl jobs stop {job_id} --address {address}`", file=err)
        return EXIT_INTERRUPTED
    return outcome(client, job_id, status, err)


# ---------------------------------------------------------------------------------- distmarl jobs ...
def _when(ms: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def details(info: Any) -> dict[str, Any]:
    """The fields worth showing of a ``JobDetails``, runtime env masked."""
    return {
        "submission_id": getattr(info, "submission_id", None),
        "job_id": getattr(info, "job_id", None),
        "status": status_name(info.status),
        "entrypoint": info.entrypoint,
        "message": getattr(info, "message", None),
        "error_type": getattr(info, "error_type", None),
        "start_time": _when(getattr(info, "start_time", None)),
        "end_time": _when(getattr(info, "end_time", None)),
        "metadata": dict(getattr(info, "metadata", None) or {}),
        "runtime_env": masked_runtime_env(getattr(info, "runtime_env", None)),
    }


def list_jobs(client: Any, out: IO[str] = sys.stdout) -> int:
    jobs = sorted(client.list_jobs(), key=lambda j: getattr(j, "start_time", 0) or 0)
    rows = [("ID", "STATUS", "STARTED", "ENTRYPOINT")]
    for j in jobs:
        entry = j.entrypoint if len(j.entrypoint) <= 70 else j.entrypoint[:67] + "..."
        rows.append((j.submission_id or j.job_id or "-", status_name(j.status),
                     _when(getattr(j, "start_time", None)), entry))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] + "\n")
    return 0


def job_status(client: Any, job_id: str, *, as_json: bool = False,
               out: IO[str] = sys.stdout) -> int:
    d = details(client.get_job_info(job_id))
    if as_json:
        out.write(json.dumps(d, indent=1) + "\n")
        return 0
    out.write(f"{job_id}: {d['status']}\n")
    for key in ("message", "entrypoint", "start_time", "end_time", "metadata", "runtime_env"):
        value = d[key]
        if value:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out.write(f"  {key}: {text.strip().splitlines()[0] if key == 'message' else text}\n")
    return 0


def job_logs(client: Any, job_id: str, *, follow_logs: bool = False,
             out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    if follow_logs:
        try:
            follow(client, job_id, out, err)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        return 0
    out.write(client.get_job_logs(job_id))
    return 0


def stop_job(client: Any, job_id: str, *, wait: bool = False, timeout_s: float = 60.0,
             out: IO[str] = sys.stdout) -> int:
    stopped = client.stop_job(job_id)
    status = status_name(client.get_job_status(job_id))
    if not stopped:
        out.write(f"{job_id}: already {status}, nothing to stop\n")
        return 0
    if wait:
        status = wait_terminal(client, job_id, poll_s=0.5, timeout_s=timeout_s)
    out.write(f"{job_id}: stop requested, now {status}\n")
    return 0
