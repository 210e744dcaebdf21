"""``distmarl submit`` against a head whose job agent is still starting: Ray's job server
answers "No available agent to submit job, please try again later." (HTTP 500, from
``job_head.submit_job``); submit asks again with growing pauses, says so, and gives up after
``--agent-wait`` seconds with Ray's message.

The server here is a real HTTP server speaking the job server's endpoints that a submission
uses (version, package upload, submit) through Ray's own ``JobSubmissionClient``: a real head
whose agent is not ready cannot be made to wait on demand."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from distmarl import jobs
from distmarl.cli import main
from tests.jobs.raycluster import ROOT

TINY = ROOT / "examples" / "configs" / "tiny.yaml"
#: the job server's answer while no job agent is available (ray/dashboard/modules/job/job_head.py)
NOT_READY = "No available agent to submit job, please try again later."


class JobServer(ThreadingHTTPServer):
    """Answers the first ``refusals`` submissions as a head without a job agent, then accepts;
    ``bad_request`` answers every submission 400 instead (an error that is no reason to wait).
    ``submissions`` holds each submission's body and the time it came."""

    def __init__(self, refusals: int, bad_request: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.refusals, self.bad_request = refusals, bad_request
        self.submissions: list[tuple[float, dict]] = []
        self.packages: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: JobServer

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _answer(self, status: int, body: str | dict, kind: str = "text/plain") -> None:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if isinstance(body, dict) else kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def do_GET(self) -> None:
        if self.path == "/api/version":
            import ray

            self._answer(200, {"version": "4", "ray_version": ray.__version__,
                               "ray_commit": "test", "session_name": "test"})
        elif self.path.startswith("/api/packages/"):
            self._answer(200 if self.path in self.server.packages else 404, "")
        else:
            self._answer(404, "not found")

    def do_PUT(self) -> None:
        self._body()
        self.server.packages.add(self.path)
        self._answer(200, "")

    def do_POST(self) -> None:
        body = json.loads(self._body())
        self.server.submissions.append((time.monotonic(), body))
        if self.server.bad_request:
            self._answer(400, "TypeError: bad entrypoint")
        elif len(self.server.submissions) <= self.server.refusals:
            self._answer(500, NOT_READY)
        else:
            sid = body["submission_id"]
            self._answer(200, {"job_id": sid, "submission_id": sid})


@pytest.fixture
def serve(monkeypatch, tmp_path: Path) -> Iterator:
    """Start a :class:`JobServer` (no Ray token anywhere: the lookup sees an empty home)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                "RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    servers: list[JobServer] = []

    def start(refusals: int, bad_request: bool = False) -> JobServer:
        server = JobServer(refusals, bad_request)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def submit(server: JobServer, *flags: str) -> int:
    return main(["submit", str(TINY), "--address", server.url, "--no-wait", "--no-mlflow-env",
                 "--submission-id", "distmarl-retry-test", *flags])


def test_a_job_agent_that_is_not_ready_is_asked_again_until_it_is(serve, capsys) -> None:
    server = serve(refusals=2)
    assert submit(server, "--agent-wait", "20") == 0
    err = capsys.readouterr().err
    assert "distmarl: job agent not ready, retrying in 1 s" in err
    assert "distmarl: job agent not ready, retrying in 2 s" in err
    assert "distmarl: submitted distmarl-retry-test" in err
    times = [t for t, _ in server.submissions]
    assert len(times) == 3  # two refusals, then the job
    assert [b["submission_id"] for _, b in server.submissions] == ["distmarl-retry-test"] * 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 0.9 < gaps[0] < 1.9 and 1.9 < gaps[1] < 2.9  # growing pauses


def test_the_wait_is_bounded_then_rays_message_stands(serve, capsys) -> None:
    server = serve(refusals=1000)
    started = time.monotonic()
    assert submit(server, "--agent-wait", "3") == jobs.EXIT_UNREACHABLE
    assert time.monotonic() - started < 8
    err = capsys.readouterr().err
    assert err.count("job agent not ready, retrying") == 2  # pauses of 1 s and 2 s
    assert NOT_READY in err.splitlines()[-1]
    assert len(server.submissions) == 3


def test_other_errors_are_not_retried(serve, capsys) -> None:
    server = serve(refusals=0, bad_request=True)
    assert submit(server) == jobs.EXIT_UNREACHABLE
    err = capsys.readouterr().err
    assert "retrying" not in err and "bad entrypoint" in err
    assert len(server.submissions) == 1


def test_backoff_doubles_up_to_ten_seconds_within_the_wait() -> None:
    assert jobs.backoff(60) == [1, 2, 4, 8, 10, 10, 10, 10, 5]
    assert jobs.backoff(0) == [] and jobs.backoff(2.5) == [1, 1.5]
