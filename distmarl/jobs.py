"""Ray Jobs for distmarl: submit ``distmarl train`` to a cluster, follow it, list, inspect, stop.

What a submission sends (the resolved config, the runtime env, the MLflow variables) is built
and checked by :mod:`distmarl.job_request`; the Ray token of a token-protected job server is
found as :mod:`distmarl.job_auth` says. This module talks to the job server through a
``JobSubmissionClient`` that :mod:`distmarl.cli` builds and passes in, so it imports no Ray:
only ``distmarl.runtime`` and the CLI import ray (an import-linter contract in
``pyproject.toml`` says so).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from distmarl.job_request import (
    JobRequest,
    describe,
    masked_runtime_env,
    staged_working_dir,
    upload_runtime_env,
)

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")

#: Exit codes of ``distmarl submit`` / ``distmarl jobs``: 2 (a config or usage error) is the
#: CLI's own; a job that SUCCEEDED exits 0.
EXIT_FAILED = 1
EXIT_STOPPED = 3
EXIT_UNREACHABLE = 4
EXIT_INTERRUPTED = 130
#: seconds ``distmarl submit`` keeps asking a job server whose agent is still starting
AGENT_WAIT_S = 60.0


def default_address(environ: Mapping[str, str] = os.environ) -> str:
    """Like ``ray job``: ``$RAY_API_SERVER_ADDRESS``, then ``$RAY_ADDRESS``, then the local head."""
    return (environ.get("RAY_API_SERVER_ADDRESS") or environ.get("RAY_ADDRESS")
            or DEFAULT_ADDRESS)



# ---------------------------------------------------------------------------------- talking to the cluster
def not_ready(error: Exception) -> bool:
    """Whether the job server answered "try again later": a head whose job agent is still
    starting (Ray's ``RuntimeError``: "Request failed with status code 500: No available agent
    to submit job, please try again later.")."""
    return isinstance(error, RuntimeError) and "try again later" in str(error)


def backoff(wait_s: float, first_s: float = 1.0, most_s: float = 10.0) -> list[float]:
    """The pauses between tries within ``wait_s`` seconds in all: doubling from ``first_s``,
    at most ``most_s`` each, the last one cut to what is left (``60`` -> 1, 2, 4, 8, 10, 10,
    10, 10, 5)."""
    pauses: list[float] = []
    pause = first_s
    while sum(pauses) < wait_s:
        pauses.append(min(pause, most_s, wait_s - sum(pauses)))
        pause *= 2
    return pauses


def submit(client: Any, request: JobRequest, *, address: str, err: IO[str] = sys.stderr,
           agent_wait_s: float = AGENT_WAIT_S) -> str:
    """Stage the working dir, submit, return the submission id (the upload happens in here).
    A job server whose agent is not ready yet is asked again, with growing pauses, for up to
    ``agent_wait_s`` seconds (each retry said on ``err``); then its error stands."""
    print(describe(request, address), file=err, flush=True)
    pauses = iter(backoff(agent_wait_s))
    with staged_working_dir(request) as staged:
        runtime_env = upload_runtime_env(request, staged)
        while True:
            try:
                return str(client.submit_job(entrypoint=request.entrypoint,
                                             runtime_env=runtime_env, metadata=request.metadata,
                                             submission_id=request.submission_id))
            except RuntimeError as error:
                pause = next(pauses, None)
                if pause is None or not not_ready(error):
                    raise
                print(f"distmarl: job agent not ready, retrying in {pause:g} s", file=err,
                      flush=True)
                time.sleep(pause)


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
               out: IO[str] = sys.stdout, err: IO[str] = sys.stderr,
               agent_wait_s: float = AGENT_WAIT_S) -> int:
    """Submit ``request`` (retrying a job agent that is not ready for ``agent_wait_s``) and,
    with ``wait``, follow it to its end; returns the exit code."""
    job_id = submit(client, request, address=address, err=err, agent_wait_s=agent_wait_s)
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
