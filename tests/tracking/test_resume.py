"""Stop after the first generation, resume: counters go on, state comes back (prioritised
replay's priorities too), one MLflow run. And a tracking server that goes away mid-run does not
stop training. The runs train in process (``local=True``): their subject is the checkpoint and
the tracking, not Ray."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from distmarl.checkpoint import load_checkpoint
from distmarl.config import load_config
from tests.fakes import tensors
from tests.tracking.test_mlflow_run import (  # noqa: F401  (an autouse fixture)
    TINY,
    no_process_tracking_uri,
    start_mlflow_server,
    stop_server,
)

pytestmark = [pytest.mark.slow]


def test_resume_continues_counters_state_and_mlflow_runs(tmp_path: Path) -> None:
    """A run stopped at its first generation resumes to its second: the learners' weights,
    the buffer's rows and priorities and the members' counters come back as saved, the
    counters go on, and the same MLflow runs hold both halves."""
    from distmarl.runtime.coordinator.run import TrainingRun
    from distmarl.runtime.driver.trainer import train
    from distmarl.runtime.fleets.local_fleet import LocalFleet

    sets = [f"tracking.directory={tmp_path}", "tracking.experiment_name=resume-exp",
            "replay.prioritized_replay=true", "replay.n_step=1"]  # a row per env step
    first = train(load_config(TINY, [*sets, "training.max_steps_per_member=200"]), run_dir=tmp_path / "run",
                  show_progress=False, local=True)
    assert first["generations"] == 1
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints")
    assert ckpt.step == first["env_steps"] and ckpt.buffer_state is not None

    # the restored parts equal what was saved
    cfg = load_config(TINY, [*sets, "training.max_steps_per_member=400", "tracking.mlflow=false"])
    run = TrainingRun(cfg, tmp_path / "probe", str(tmp_path / "run" / "checkpoints"), None,
                      threading.Event(), local=True)
    fleet = run.fleet
    assert isinstance(fleet, LocalFleet)
    try:
        states = [lr.get_state() for lr in fleet.learners]
        assert len(states) == len(ckpt.members) == 2
        for saved, restored in zip(ckpt.members, states):
            saved_t, restored_t = dict(tensors(saved["algo"]["networks"])), dict(tensors(restored["algo"]["networks"]))
            assert saved_t and saved_t.keys() == restored_t.keys()
            assert all(torch.equal(saved_t[k], restored_t[k]) for k in saved_t)
        buffer_state = fleet.buffer.state_dict()
        assert buffer_state["meta"]["counter"] == ckpt.buffer_state["meta"]["counter"] == first["env_steps"]
        assert buffer_state["columns"].keys() == ckpt.buffer_state["columns"].keys()
        for name, col in ckpt.buffer_state["columns"].items():
            np.testing.assert_array_equal(buffer_state["columns"][name], col, err_msg=name)
        assert buffer_state["meta"]["priorities"] == ckpt.buffer_state["meta"]["priorities"]
        saved_priorities = [col for name, col in ckpt.buffer_state["columns"].items()
                            if name.startswith("__priority__/")]
        assert len(saved_priorities) == 2  # one per learner
        for col in saved_priorities:  # learners' TD errors came back: not all the initial value
            assert len(col) == first["env_steps"] and len(np.unique(col)) > 10
        assert [m.env_steps for m in run.state.members] == [m["env_steps"] for m in first["members"]]
        assert run.state.generation == 1
    finally:
        fleet.close()

    second = train(load_config(TINY, [*sets, "training.max_steps_per_member=400"]), resume=tmp_path / "run",
                   show_progress=False, local=True)
    assert second["resumed_from"].endswith(ckpt.path.name)
    assert second["generations"] == 2
    for before, after in zip(first["members"], second["members"]):
        assert 400 <= after["env_steps"] < 400 + 64 and after["env_steps"] > before["env_steps"]
        assert after["fitness"][:1] == before["fitness"] and len(after["fitness"]) == 2
        assert after["updates"] > before["updates"]
    assert second["env_steps"] == sum(m["env_steps"] for m in second["members"])

    from mlflow.tracking import MlflowClient

    client = MlflowClient(second["mlflow"]["uri"])
    assert second["mlflow"]["parent"] == first["mlflow"]["parent"]
    assert second["mlflow"]["members"] == first["mlflow"]["members"]
    exp = client.get_experiment_by_name("resume-exp")
    assert len(client.search_runs([exp.experiment_id])) == 3  # one parent, two members
    history = client.get_metric_history(first["mlflow"]["members"][0], "env_steps")
    steps = [h.step for h in history]
    assert max(steps) >= 400 and min(steps) <= 200  # one run holds both halves


def test_resume_of_a_corrupted_checkpoint_names_the_file(tmp_path, capsys) -> None:
    from distmarl.checkpoint import save_checkpoint
    from distmarl.cli import main

    path = save_checkpoint(tmp_path / "run" / "checkpoints", 10, {"x": 1}, [{"w": torch.ones(3)}])
    (path / "member-0.pt").write_bytes(b"garbage" * 10)
    code = main(["evaluate", str(path)])
    assert code == 2
    assert "member-0.pt is truncated or changed" in capsys.readouterr().err


def test_tracking_server_going_away_does_not_stop_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``mlflow server`` killed once the run's tracking has started and before it
    ends: the run still reaches ``max_steps`` with its checkpoint, counts the failed writes
    and keeps the metrics it could not send in ``mlflow-unsent.jsonl`` (after a shortened
    wait for the server at the end)."""
    monkeypatch.setattr("distmarl.tracking.mlflow.FINISH_TIMEOUT_S", 2.0)
    from distmarl.runtime.coordinator.run import Coordinator
    from distmarl.runtime.driver.trainer import train

    proc, uri = start_mlflow_server(tmp_path)
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
        stop_server(proc)
    assert killed_at and killed_at[0] < summary["env_steps"], "the server died after the run"
    assert summary["mlflow"]["parent"] and len(summary["mlflow"]["members"]) == 2
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 800 for m in summary["members"])
    assert summary["tracking"]["failures"] > 0
    unsent = Path(summary["run_dir"]) / "mlflow-unsent.jsonl"
    lines = [json.loads(x) for x in unsent.read_text().splitlines()]
    assert lines and {"run_id", "key", "value", "step"} <= set(lines[0])
    assert Path(summary["checkpoint"]).exists()
