"""Stop after the first generation, resume: counters go on, state comes back (prioritised
replay's priorities too), one MLflow run. The runs train in process (``local=True``): their
subject is the checkpoint and the tracking, not Ray."""

from __future__ import annotations

import threading
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
        assert ckpt.buffer_state is not None and len(ckpt.buffer_state) == 1  # one shard
        [saved_buffer] = ckpt.buffer_state
        buffer_state = fleet.shards[0].state_dict()
        assert buffer_state["meta"]["counter"] == saved_buffer["meta"]["counter"] == first["env_steps"]
        assert buffer_state["columns"].keys() == saved_buffer["columns"].keys()
        for name, col in saved_buffer["columns"].items():
            np.testing.assert_array_equal(buffer_state["columns"][name], col, err_msg=name)
        assert buffer_state["meta"]["priorities"] == saved_buffer["meta"]["priorities"]
        saved_priorities = [col for name, col in saved_buffer["columns"].items()
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
