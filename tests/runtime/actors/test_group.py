"""A learner group's rounds update several members together, each as its own learner would."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distmarl.config import ExperimentConfig, load_config
from distmarl.runtime.actors import group as group_module
from distmarl.runtime.actors.group import LearnerGroup
from distmarl.runtime.coordinator.run import TrainingRun

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = {  # a family each: off-policy with prioritised 3-step replay, on-policy fragments
    "MADDPG": (ROOT / "examples" / "configs" / "tiny.yaml", ["population.size=3"]),
    "MAPPO": (ROOT / "examples" / "configs" / "spread_mappo.yaml",
              ["population.size=3", "env.num_envs=2", "algorithm.hp.learn_step=8",
               "algorithm.hp.batch_size=16"]),
}


def config(tmp: Path, algo: str) -> ExperimentConfig:
    """The config of a family's run of three members."""
    path, sets = CONFIGS[algo]
    return load_config(path, [f"tracking.directory={tmp}", "tracking.mlflow=false", *sets])


def filled_run(tmp: Path, name: str, algo: str) -> TrainingRun:
    """An in-process run of three members whose workers have each collected 8 calls, none of
    it learned yet."""
    run = TrainingRun(config(tmp, algo), tmp / name, None, None, threading.Event(), local=True)
    steps = run.scheduler.path.collect_steps(run.state.members[0])
    for _ in range(8):
        for m in run.state.members:
            run.fleet.workers[m.member][0].collect(steps, m.version, m.weights_box)
    return run


def weights(run: TrainingRun, member: int) -> dict[str, Any]:
    return run.fleet.learners[member].algo.get_weights()["params"]


@pytest.mark.parametrize("algo", ["MADDPG", "MAPPO"])
def test_members_trained_together_end_as_each_trained_alone(
        algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_module, "ROUND_UPDATES", 6)
    alone, together = filled_run(tmp_path, "alone", algo), filled_run(tmp_path, "together", algo)
    try:
        group = LearnerGroup(together.fleet.learners)
        for _ in range(2):  # the second round samples with the first round's priorities
            want = {m: alone.fleet.learners[m].train(6) for m in range(3)}
            got = group.pull()
            for m, result in want.items():
                assert got[m].updates == result.updates > 0
                assert got[m].metrics == pytest.approx(result.metrics, rel=1e-4, abs=1e-5)
                assert (got[m].weights is None) == (result.weights is None)
        for m in range(3):
            a, b = weights(alone, m), weights(together, m)
            assert max(float(np.abs(a[k] - b[k]).max()) for k in a) < 1e-5
            assert together.fleet.learners[m].updates == alone.fleet.learners[m].updates
    finally:
        alone.fleet.close()
        together.fleet.close()


def test_a_group_holds_one_family(tmp_path: Path) -> None:
    off, on = filled_run(tmp_path, "off", "MADDPG"), filled_run(tmp_path, "on", "MAPPO")
    try:
        with pytest.raises(ValueError, match="one family"):
            LearnerGroup([off.fleet.learners[0], on.fleet.learners[0]])
    finally:
        off.fleet.close()
        on.fleet.close()
