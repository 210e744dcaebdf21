"""Run directories written by an earlier version of distmarl (members updated one by one by
their own objects, before every update was a stack) resume with today's code, and their
members load as policies for ``distmarl evaluate``.

``tests/data/checkpoints`` holds two such runs, cut to their last checkpoint: ``tiny``
(MADDPG, prioritised replay's buffer file included) and ``mappo`` (simple_spread, two
members with small networks), both written with ``--local``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from distmarl.collect.evaluation import evaluate_checkpoint
from distmarl.config import load_config
from distmarl.runtime.driver.trainer import train

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"


def copied(name: str, tmp_path: Path) -> Path:
    run = tmp_path / name
    shutil.copytree(DATA / name, run)
    return run


@pytest.mark.parametrize("name,more", [("tiny", 200), ("mappo", 32)])
def test_an_earlier_versions_run_resumes_and_learns_on(name: str, more: int,
                                                       tmp_path: Path) -> None:
    run = copied(name, tmp_path)
    (saved,) = sorted((run / "checkpoints").iterdir())
    meta = json.loads((saved / "meta.json").read_text())
    before = [m["env_steps"] for m in meta["members"]]
    cfg = load_config(run / "config.yaml", [
        f"tracking.directory={tmp_path}", "tracking.mlflow=false",
        f"training.max_steps_per_member={max(before) + more}"])
    summary = train(cfg, resume=run, show_progress=False, local=True)
    assert summary["resumed_from"].endswith(saved.name)
    assert summary["stop_reason"] == "max_steps"
    for was, member, old in zip(before, summary["members"], meta["members"], strict=True):
        assert member["env_steps"] > was
        assert member["updates"] > old["updates"]
        assert np.isfinite(member["fitness"][-1])


@pytest.mark.parametrize("name", ["tiny", "mappo"])
def test_an_earlier_versions_checkpoint_is_evaluated_by_its_policy(name: str,
                                                                    tmp_path: Path) -> None:
    run = copied(name, tmp_path)
    (saved,) = sorted((run / "checkpoints").iterdir())
    result = evaluate_checkpoint(saved, episodes=2)
    assert result["episodes"] == 2 and np.isfinite(result["mean_score"])
