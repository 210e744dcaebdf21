"""``env.nonfinite`` through the trainer's config path: the setting reaches every rollout
worker's envs (``factory.make_venv``), in process (``train(cfg, local=True)``).

The env is ``tests.envs.toy_envs:NonFiniteEnv`` (a NaN observation of agent ``d_1`` at step 2
of every episode, an inf reward of ``d_0`` at step 3). ``raise`` ends the run with an error
naming the sub-env and the agent; ``drop`` trains to the end on the remaining rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


def nonfinite_config(tmp_path: Path, mode: str):
    return load_config(TINY, [
        "env.spec=tests.envs.toy_envs:NonFiniteEnv", "env.kwargs={}", f"env.nonfinite={mode}",
        "training.max_steps_per_member=200", "evolution.evo_steps=100", "tracking.mlflow=false",
        f"tracking.directory={tmp_path}"])


def test_nonfinite_raise_stops_the_run_naming_sub_env_and_agent(tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train

    cfg = nonfinite_config(tmp_path, "raise")
    assert cfg.env.nonfinite == "raise"
    with pytest.raises(Exception, match=r"sub-env 0 returned a non-finite \(NaN / inf\) "
                                        r"observation for agent 'd_1'"):
        train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)


def test_nonfinite_drop_trains_to_the_end(tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train

    summary = train(nonfinite_config(tmp_path, "drop"), run_dir=tmp_path / "run",
                    show_progress=False, local=True)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 200 and m["updates"] > 0 for m in summary["members"])
    assert all(np.isfinite(m["fitness"]).all() and len(m["fitness"]) == 2
               for m in summary["members"])
    # every episode has a NaN observation and an inf reward: the dropped rows reach the summary
    dropped = summary["faults"]["dropped_nonfinite_rows"]
    steps = sum(m["env_steps"] for m in summary["members"])
    assert 0 < dropped <= 2 * steps, (dropped, steps)
