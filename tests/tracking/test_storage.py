"""Runs kept on an object store: an S3-compatible server (moto's) started here on 127.0.0.1,
reached through pyarrow's ``S3FileSystem`` with credentials and endpoint from the environment.
A real ``distmarl train`` keeps its checkpoints there, is stopped by SIGTERM and resumed from
the URI by another process, and ``evaluate`` and ``buffer-info`` read from it; a run whose
server is stopped mid-run and started again trains on, reports what it could not write, and
leaves no half-written checkpoint that a reader would take; bad storage fails before the run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from distmarl.storage import MANIFEST, Storage, StorageError
from tests.tracking.test_mlflow_run import no_process_tracking_uri  # noqa: F401  (autouse)

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
MOTO = Path(sys.executable).parent / "moto_server"
BUCKET = "distmarl-runs"


@dataclass
class S3Server:
    """moto's S3 server on ``port``, started (again) by :meth:`start`."""

    port: int
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.1)
        from pyarrow import fs

        fs.S3FileSystem(endpoint_override=f"http://127.0.0.1:{self.port}",
                        allow_bucket_creation=True).create_dir(BUCKET)  # (it starts empty)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}.items():
        monkeypatch.setenv(key, value)
    server = S3Server(port)
    server.start()
    yield server
    server.stop()


def distmarl(*args: str, **kw: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distmarl", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)  # type: ignore[call-overload]


def test_a_run_kept_on_s3_is_stopped_resumed_from_its_uri_and_evaluated(s3: S3Server,
                                                                        tmp_path: Path) -> None:
    runs = Storage(f"s3://{BUCKET}/runs")
    common = ["--local", "--quiet", "--set", "tracking.mlflow=false",
              "--set", "tracking.checkpoint_interval=100", "--set", "tracking.videos=false"]
    first = distmarl("train", str(TINY), *common, "--storage", f"s3://{BUCKET}/runs",
                     "--set", f"tracking.directory={tmp_path / 'one'}",
                     "--set", "training.max_steps_per_member=100000")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (runs.names() and runs.child(
            runs.names()[0]).checkpoints()):
        assert first.poll() is None, first.communicate()
        time.sleep(0.5)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    [name] = runs.names()
    run = runs.child(name)
    assert f"distmarl: run kept at s3://{BUCKET}/runs/{name}" in out
    stopped = json.loads((tmp_path / "one" / name / "summary.json").read_text())
    assert stopped["checkpoints"]["stored"] >= 2 and not stopped["checkpoints"]["failed"]
    assert len(run.checkpoints()) <= 4  # the last 3 and the best
    assert json.loads(runs.fs.open_input_stream(f"{run.root}/summary.json").read()
                      )["stop_reason"] == "stopped by SIGTERM"

    # another machine (another run directory) resumes from the URI alone
    steps = stopped["members"][0]["env_steps"] + 200
    second = distmarl("train", str(TINY), *common, "--resume", run.uri,
                      "--set", f"tracking.directory={tmp_path / 'two'}",
                      "--set", f"training.max_steps_per_member={steps}")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    resumed = json.loads(runs.fs.open_input_stream(f"{run.root}/summary.json").read())
    assert resumed["stop_reason"] == "max_steps" and resumed["resumed_from"]
    assert all(m["env_steps"] >= steps for m in resumed["members"])

    scored = distmarl("evaluate", run.uri, "--episodes", "2")
    out, err = scored.communicate(timeout=120)
    assert scored.returncode == 0, err
    assert "mean_score" in json.loads(out)
    info = distmarl("buffer-info", f"{run.uri}/checkpoints")
    out, err = info.communicate(timeout=120)
    assert info.returncode == 0, err
    assert json.loads(out)["counter"] > 0
    exported = distmarl("export", f"{run.uri}/checkpoints/{run.checkpoints()[-1]}",
                        str(tmp_path / "policy"), "--format", "torchscript")
    out, err = exported.communicate(timeout=120)
    assert exported.returncode == 0, err
    assert any((tmp_path / "policy").iterdir())


def test_a_store_that_goes_away_mid_run_costs_checkpoints_not_the_run(s3: S3Server,
                                                                      tmp_path: Path) -> None:
    from distmarl.checkpoint import load_checkpoint
    from distmarl.runtime.driver.trainer import train

    runs = Storage(f"s3://{BUCKET}/runs")
    cfg = load_config(TINY, [f"tracking.directory={tmp_path}", "tracking.mlflow=false",
                             f"tracking.storage=s3://{BUCKET}/runs", "tracking.videos=false",
                             "tracking.checkpoint_interval=50",
                             "training.max_steps_per_member=4000"])
    outage: dict[str, float] = {}

    def interrupt() -> None:  # once the first checkpoint is stored: 15 s without the server
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (runs.names() and runs.child(
                runs.names()[0]).checkpoints()):
            time.sleep(0.2)
        s3.stop()
        outage["from"] = time.monotonic()
        time.sleep(15)
        s3.start()
        outage["to"] = time.monotonic()

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    thread.join(60)
    assert outage.get("to"), "the run ended before the server came back"
    assert summary["stop_reason"] == "max_steps"
    report = summary["checkpoints"]
    # the outage cost checkpoints, each accounted for: failed after its retries (named), or
    # passed over for a newer one while the copy in hand was retried (counted)
    assert report["failed"] or report["superseded"], report
    assert report["written"] == report["stored"] + report["superseded"] + len(report["failed"])
    # training went on meanwhile: taking the states is all it waited for
    assert report["blocked_s"] < 0.25 * summary["wall_seconds"], report
    assert all(f["where"].startswith("s3://") for f in report["failed"])  # (none: retried)
    assert report["stored"] >= 1  # and the ones after it were stored
    run = runs.child("run")
    stored = run.checkpoints()
    assert stored and stored[-1] == Path(summary["checkpoint"]).name
    for name in run.names("checkpoints"):  # none half-written that a reader would take
        assert name not in stored or MANIFEST in run.names(f"checkpoints/{name}")
    latest = run.fetch_checkpoint(None, tmp_path / "fetched")
    assert load_checkpoint(latest).step == summary["env_steps"]
    assert os.path.exists(tmp_path / "run" / "summary.json")


def test_storage_that_cannot_be_used_fails_before_the_run(s3: S3Server, tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train

    def run(storage: str) -> None:
        cfg = load_config(TINY, [f"tracking.directory={tmp_path}", "tracking.mlflow=false",
                                 f"tracking.storage={storage}"])
        train(cfg, show_progress=False, local=True)

    with pytest.raises(ConfigError, match=r"tracking\.storage: storage 'ftp://x/runs': unknown "
                                          r"scheme ftp://"):
        run("ftp://x/runs")
    with pytest.raises(ConfigError, match=r"bucket 'no-such-bucket' does not exist"):
        run("s3://no-such-bucket/runs")
    for secret in ("s3://AKIA:hunter2@bucket/runs", "s3://bucket/runs?secret_key=hunter2"):
        with pytest.raises(ConfigError, match="carries credentials") as err:
            run(secret)
        assert "hunter2" not in str(err.value)
    assert not list(tmp_path.iterdir())  # no run directory was made
    with pytest.raises(StorageError, match="no complete checkpoint"):
        Storage(f"s3://{BUCKET}/nothing").fetch_checkpoint(None, tmp_path / "x")
