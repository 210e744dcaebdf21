"""A tiny training run tracked in MLflow: the default local store, and a real ``mlflow server``
whose one run (:func:`served_run`) is read twice: its records and elite model over HTTP, and its
artifact page as a user sees it in headless Chromium (Debian's, ``scripts/install_browser.sh``),
whose rendered page must show ``videos/elite.gif`` loaded as an image; that test skips without
Chromium, unless ``DISTMARL_REQUIRE_BROWSER`` is set (``.ci/run`` sets it). The runs train in
process (``local=True``): their subject is the tracking, not Ray."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from distmarl.config import load_config

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


@pytest.fixture(autouse=True)
def no_process_tracking_uri() -> Iterator[None]:
    """No process-wide MLflow tracking URI around each test. ``mlflow.set_tracking_uri`` (an
    in-process run logging its elite model, :func:`check_elite_model_acts`) sets one, and
    ``$MLFLOW_TRACKING_URI`` with it, which a later run without ``tracking.mlflow_uri`` in this
    process would take for its store."""
    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # None: unset, env var too
    yield
    mlflow.set_tracking_uri(before)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(tmp: Path) -> tuple[subprocess.Popen, str]:
    """A real ``mlflow server`` on a SQLite store (started from the blank, as a run's own
    store is) and a local artifact directory; ``(process, uri)`` once it answers. Without
    MLflow's job execution (a job runner and seven Huey consumers, each importing MLflow),
    which tracking does not use."""
    from distmarl.tracking.blank_store import start_from_blank

    start_from_blank(f"sqlite:///{tmp / 'server.db'}")
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    with (tmp / "mlflow-server.log").open("w") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", f"sqlite:///{tmp / 'server.db'}",
             "--artifacts-destination", str(tmp / "server-artifacts"), "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    uri = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(720):  # up to 3 min: a loaded 2-core machine starts it slowly
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=1) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.25)
    stop_server(proc)
    raise RuntimeError(f"mlflow server did not start: {(tmp / 'mlflow-server.log').read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server and its workers (its process group); safe to call twice. SIGKILL after
    5 s: a server still holding a client's open connection waits for it to close."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 20)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue


def run_tiny(tmp: Path, sets: list[str]) -> dict:
    """``tiny.yaml`` for 400 env steps per member, tracked in experiment ``tiny-exp``, trained
    in this process."""
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(TINY, [f"tracking.directory={tmp}", "training.max_steps_per_member=400",
                             "tracking.experiment_name=tiny-exp", *sets])
    return train(cfg, run_dir=tmp / "run", show_progress=False, local=True)


def check_tracked_run(uri: str, summary: dict, population: int = 2, buffer: bool = False
                      ) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    ids = summary["mlflow"]
    exp = client.get_experiment_by_name("tiny-exp")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1 + population
    parent = client.get_run(ids["parent"])
    assert parent.info.status == "FINISHED"
    run_dir = Path(summary["run_dir"])  # the parent run is named as its folder, which it names
    assert parent.info.run_name == run_dir.name
    assert parent.data.tags["distmarl.run_dir"] == str(run_dir.resolve())
    assert parent.data.params["population.size"] == str(population)
    assert parent.data.params["algorithm.name"] == "MADDPG"
    assert parent.data.tags["algorithm"] == "MADDPG" and "distmarl.version" in parent.data.tags
    best = client.get_metric_history(ids["parent"], "population/best_fitness")
    assert best and best[-1].value == pytest.approx(summary["best_fitness"])
    steps = [m.step for m in client.get_metric_history(ids["parent"], "population/env_steps")]
    assert steps == sorted(steps) and steps[-1] > 0
    [final] = client.get_metric_history(ids["parent"], "population/final_score")  # once, at the end
    assert final.value == pytest.approx(summary["final_score"]) and final.step == steps[-1]
    [random] = client.get_metric_history(ids["parent"], "population/random_score")
    assert random.value == pytest.approx(summary["random_score"])
    [learning] = client.get_metric_history(ids["parent"], "time/learner/updating")  # at the end
    assert learning.value == pytest.approx(summary["time"]["learner"]["updating"])
    for member, run_id in enumerate(ids["members"]):
        child = client.get_run(run_id)
        assert child.data.tags["mlflow.parentRunId"] == ids["parent"]
        assert child.data.params["batch_size"] == "32" and "lr_actor" in child.data.params
        fitness = client.get_metric_history(run_id, "fitness")
        assert [f.value for f in fitness][-1] == pytest.approx(summary["members"][member]["fitness"][-1])
        assert client.get_metric_history(run_id, "env_steps")[-1].value == summary["members"][member]["env_steps"]
        assert client.get_metric_history(run_id, "loss/critic/speaker_0")
        lag = client.get_metric_history(run_id, "max_policy_lag_seen")[-1].value
        assert lag == summary["members"][member]["max_policy_lag_seen"]
        [score] = client.get_metric_history(run_id, "final_score")
        assert score.value == pytest.approx(summary["final_scores"][member])
        # every member's hyperparameters at every write, mutated or not
        lr = client.get_metric_history(run_id, "hp/lr_actor")
        assert len(lr) == len(steps) and lr[-1].value == summary["members"][member]["hp"]["lr_actor"]
    names = {a.path for a in client.list_artifacts(ids["parent"])}
    assert {"config.yaml", "lineage.json", "fitness.png", "family_tree.png", "checkpoint"} <= names
    # the last checkpoint, its replay buffer only with tracking.log_buffer (off by default)
    checkpoint = {Path(a.path).name for a in client.list_artifacts(ids["parent"], "checkpoint")}
    assert {"meta.json", "manifest.json", "member-0.pt"} <= checkpoint
    assert ("buffer.arrow" in checkpoint) == buffer
    # the elite playing the final evaluation's first episode: a frame per step and the reset
    # (a GIF shows a frame that repeats the one before it as a longer showing of that one)
    from PIL import Image, ImageSequence

    gif = Path(client.download_artifacts(ids["parent"], "videos/elite.gif"))
    with Image.open(gif) as image:
        shown = [frame.info["duration"] for frame in ImageSequence.Iterator(image)]
    assert round(sum(shown) / min(shown)) == 26
    assert (Path(summary["run_dir"]) / "videos" / "elite.gif").is_file()
    lineage = json.loads(Path(client.download_artifacts(ids["parent"], "lineage.json")).read_text())
    assert len(lineage["individuals"]) >= population


def check_elite_model_acts(summary: dict, uri: str) -> None:
    import mlflow

    from distmarl.envs import make_vector_env

    mlflow.set_tracking_uri(uri)
    assert summary["elite_model_uri"]
    model = mlflow.pytorch.load_model(summary["elite_model_uri"])
    # a real module: its parameters registered, movable, each agent's policy traceable
    assert sum(p.numel() for p in model.parameters()) > 0 and model.to("cpu") is model
    listener = torch.jit.trace(model.actor("listener_0"), torch.zeros(2, 11))
    x = torch.randn(5, 11)
    assert torch.equal(listener(x), model.actor("listener_0")(x))
    venv = make_vector_env("mpe2:simple_speaker_listener_v4", 2, mode="sync", seed=0,
                           continuous_actions=True, max_cycles=25)
    obs, _ = venv.reset(seed=0)
    total = 0.0
    for _ in range(25):
        actions = model(obs)
        assert actions["listener_0"].shape == (2, 5)
        obs, rew, *_ = venv.step(actions)
        total += float(sum(r.sum() for r in rew.values()))
    venv.close()
    assert np.isfinite(total)


def test_default_local_store(tmp_path: Path) -> None:
    """Without a tracking URI the run tracks into a SQLite store in its run directory: runs,
    params, metrics, artifacts (the replay buffer too, asked for) and an elite model that
    acts."""
    summary = run_tiny(tmp_path, ["tracking.log_buffer=true",
                                  "tracking.video_every_generations=1"])
    uri = summary["mlflow"]["uri"]
    assert uri.startswith("sqlite:///") and str(tmp_path / "run") in uri
    check_tracked_run(uri, summary, buffer=True)
    # the elite's video after every generation too, beside the final one
    from mlflow.tracking import MlflowClient

    videos = {Path(a.path).name for a in
              MlflowClient(uri).list_artifacts(summary["mlflow"]["parent"], "videos")}
    assert videos == {"elite.gif", *(f"generation_{g}.gif"
                                     for g in range(1, summary["generations"] + 1))}
    check_elite_model_acts(summary, uri)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen, str]]:
    """One real ``mlflow server`` for this module: ``(process, uri)``. The clients wait up to
    30 s for an answer (not the run's 5 s): a test machine loaded past its cores answers
    slowly, which is not these tests' subject. The last test of the module kills it."""
    proc, uri = start_mlflow_server(tmp_path_factory.mktemp("mlflow-server"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        try:
            yield proc, uri
        finally:
            stop_server(proc)


@pytest.fixture(scope="module")
def served_run(server: tuple[subprocess.Popen, str], tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[str, dict[str, Any]]:
    """The server's URI and the summary of ``tiny.yaml`` trained in process (400 env steps per
    member, experiment ``tiny-exp``) with the server as its tracking store."""
    _, uri = server
    return uri, run_tiny(tmp_path_factory.mktemp("served-run"), [f"tracking.mlflow_uri={uri}"])


def test_real_mlflow_server(served_run: tuple[str, dict]) -> None:
    """The same records through a real ``mlflow server`` over HTTP."""
    uri, summary = served_run
    check_tracked_run(uri, summary)
    check_elite_model_acts(summary, uri)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: headless flags for a closed network (no background connections, no first-run pages)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1500,1000"]
#: the artifact viewer's image, once the browser fetched the file (a blob URL holds its bytes)
SHOWN = re.compile(r'<img alt="videos/elite\.gif" src="blob:')


def chromium(url: str, profile: Path, *args: str) -> str:
    """Headless Chromium on ``url`` (up to 20 s of the page's time); its stdout."""
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000",
         *args, url], capture_output=True, text=True, timeout=180, check=False).stdout


def test_the_mlflow_ui_shows_the_elite_video(request: pytest.FixtureRequest,
                                             tmp_path: Path) -> None:
    """The served run's artifact page, rendered: its DOM after the page's scripts ran shows
    the video; a screenshot of the page is kept beside a failure."""
    if CHROMIUM is None:
        if os.environ.get("DISTMARL_REQUIRE_BROWSER"):
            pytest.fail("DISTMARL_REQUIRE_BROWSER is set but no chromium is on PATH "
                        "(bash scripts/install_browser.sh)")
        pytest.skip("no chromium on PATH: bash scripts/install_browser.sh")
    from mlflow.tracking import MlflowClient

    uri, summary = request.getfixturevalue("served_run")  # once Chromium is known to be here
    parent = summary["mlflow"]["parent"]
    experiment = MlflowClient(uri).get_run(parent).info.experiment_id
    url = f"{uri}/#/experiments/{experiment}/runs/{parent}/artifacts/videos/elite.gif"
    dom = ""
    for attempt in range(3):  # a loaded machine may not finish the page in one budget
        dom = chromium(url, tmp_path / f"profile-{attempt}", "--dump-dom")
        if SHOWN.search(dom):
            return
    chromium(url, tmp_path / "profile-shot", f"--screenshot={tmp_path / 'artifact-page.png'}")
    pytest.fail(f"the artifact page does not show the video (screenshot: "
                f"{tmp_path / 'artifact-page.png'}): {dom[-3000:]}")


# the last test of the module: it kills the module's server
def test_tracking_server_going_away_does_not_stop_training(
        server: tuple[subprocess.Popen, str], served_run: tuple[str, dict], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's server (the last test to use it: after the served run's tests) killed
    once the run's tracking has started and before it ends: the run still reaches
    ``max_steps`` with its checkpoint, counts the failed writes and keeps the metrics it could
    not send in ``mlflow-unsent.jsonl`` (after a shortened wait for the server at the end)."""
    monkeypatch.setattr("distmarl.tracking.mlflow.FINISH_TIMEOUT_S", 2.0)
    from distmarl.runtime.coordinator.run import Coordinator
    from distmarl.runtime.driver.trainer import train

    proc, uri = server
    coordinator: list[Coordinator] = []
    killed_at: list[int] = []  # env steps when the server was gone

    def kill_when_tracking_started() -> None:
        # the run exists once its parts are built: the tracker's start() is over, the parent
        # and member runs created with their params
        for _ in range(3000):
            if coordinator and coordinator[0].current is not None:
                break
            time.sleep(0.05)
        else:
            return
        os.killpg(proc.pid, signal.SIGKILL)  # at once, as a crash: the server and its workers
        proc.wait()
        killed_at.append(coordinator[0].progress()["env_steps"])

    killer = threading.Thread(target=kill_when_tracking_started, daemon=True)
    killer.start()
    try:
        cfg = load_config(TINY, [f"tracking.directory={tmp_path}", f"tracking.mlflow_uri={uri}",
                                 "tracking.experiment_name=down-exp", "training.max_steps_per_member=800",
                                 "tracking.write_interval=50"])
        summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True,
                        on_coordinator=coordinator.append)
    finally:
        killer.join(timeout=30)
    assert killed_at and killed_at[0] < summary["env_steps"], "the server died after the run"
    assert summary["mlflow"]["parent"] and len(summary["mlflow"]["members"]) == 2
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 800 for m in summary["members"])
    assert summary["tracking"]["failures"] > 0
    unsent = Path(summary["run_dir"]) / "mlflow-unsent.jsonl"
    lines = [json.loads(x) for x in unsent.read_text().splitlines()]
    assert lines and {"run_id", "key", "value", "step"} <= set(lines[0])
    assert Path(summary["checkpoint"]).exists()
