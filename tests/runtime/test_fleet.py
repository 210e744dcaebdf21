"""Killing real processes of a running training: it goes on, counts what was lost, ends."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from distmarl.config import load_config

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"


def start(ray, tmp_path, *sets, steps: int = 600):
    """Start a tiny run of ``steps`` env steps per member in three generations; returns once
    training is under way."""
    from distmarl.runtime.coordinator import CoordinatorActor

    cfg = load_config(TINY, ["tracking.mlflow=false", f"training.max_steps={steps}",
                             f"evolution.evo_steps={steps // 3}",
                             f"tracking.directory={tmp_path}", *sets])
    coord = CoordinatorActor.remote(json.loads(cfg.model_dump_json()), str(tmp_path / "run"))
    result = coord.run.remote()
    deadline = time.time() + 240
    while time.time() < deadline:  # until training is under way
        progress = ray.get(coord.progress.remote())
        if progress["env_steps"] >= 200 and progress["updates"] > 0:
            return coord, result, ray.get(coord.handles.remote())
        time.sleep(0.2)
    raise AssertionError("training did not start")


def finish(ray, coord, result, steps: int = 600) -> dict:
    summary = ray.get(result, timeout=600)
    ray.kill(coord)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= steps for m in summary["members"])
    assert all(len(m["fitness"]) == summary["generations"] == 3 for m in summary["members"])
    return summary


def test_a_killed_rollout_worker_is_restarted_and_training_completes(ray_local, tmp_path) -> None:
    ray = ray_local
    coord, result, handles = start(ray, tmp_path)
    pid = ray.get(handles["workers"][1][0].info.remote())["pid"]
    os.kill(pid, signal.SIGKILL)
    summary = finish(ray, coord, result)
    faults = summary["faults"]
    assert faults["worker_restarts"] == 1 and faults["lost_chunks"] <= 1
    assert faults["lost_env_steps"] == 16 * faults["lost_chunks"]
    assert ray.get(handles["workers"][1][0].info.remote())["pid"] != pid
    assert any(e.get("fault") == "worker restarted" and e["member"] == 1 for e in summary["events"])


def test_a_killed_learner_is_restored_from_its_snapshot(ray_local, tmp_path) -> None:
    ray = ray_local
    coord, result, handles = start(ray, tmp_path)
    learner = handles["learners"][0]
    before = ray.get(learner.info.remote())
    os.kill(before["pid"], signal.SIGKILL)
    summary = finish(ray, coord, result)
    assert summary["faults"]["learner_restarts"] == 1
    after = ray.get(learner.info.remote())
    assert after["pid"] != before["pid"]
    assert after["updates"] > 0  # restored counters, and it learned on
    restored = [e for e in summary["events"] if e.get("fault") == "learner restarted"]
    assert restored and restored[0]["member"] == 0 and restored[0]["restored"]


def test_a_killed_buffer_is_restored_from_its_snapshot(ray_local, tmp_path) -> None:
    ray = ray_local
    # long enough that the kill, after a snapshot has been taken, lands mid-run on a fast machine
    coord, result, handles = start(ray, tmp_path, "buffer.snapshot_interval_s=0.5", steps=3000)
    time.sleep(1.0)  # let a snapshot be taken
    pid = ray.get(handles["buffer"].pid.remote())
    os.kill(pid, signal.SIGKILL)
    assert ray.get(coord.progress.remote())["stop_reason"] == "running", "killed too late"
    summary = finish(ray, coord, result, steps=3000)
    faults = summary["faults"]
    assert faults["buffer_restarts"] == 1
    event = next(e for e in summary["events"] if e.get("fault") == "buffer restarted")
    assert event["restored_rows"] > 0 and event["lost_rows"] == faults["buffer_lost_rows"]
    stats = ray.get(handles["buffer"].stats.remote())
    assert stats["counter"] >= event["restored_rows"]
