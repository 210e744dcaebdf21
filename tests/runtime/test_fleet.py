"""Killing real processes of a running training: it goes on, counts what was lost, ends."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"


#: env steps per member, in three generations: the kills land mid-run (nothing collects
#: while the members' process is down)
STEPS = 1500


def start(ray, tmp_path, *sets):
    """Start a tiny run of :data:`STEPS` env steps per member in three generations; returns
    once training is under way."""
    from distmarl.runtime.coordinator.run import CoordinatorActor

    cfg = load_config(TINY, ["tracking.mlflow=false", f"training.max_steps_per_member={STEPS}",
                             f"evolution.evo_steps={STEPS // 3}",
                             f"tracking.directory={tmp_path}", "evolution.final_episodes=2",
                             *sets])
    coord = CoordinatorActor.remote(json.loads(cfg.model_dump_json()), str(tmp_path / "run"))
    result = coord.run.remote()
    deadline = time.time() + 240
    while time.time() < deadline:  # until training is under way
        progress = ray.get(coord.progress.remote())
        if progress["env_steps"] >= 200 and progress["updates"] > 0:
            return coord, result, ray.get(coord.handles.remote())
        time.sleep(0.2)
    raise AssertionError("training did not start")


def finish(ray, coord, result) -> dict:
    summary = ray.get(result, timeout=600)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= STEPS for m in summary["members"])
    assert all(len(m["fitness"]) == summary["generations"] == 3 for m in summary["members"])
    return summary


def test_killed_actors_are_restarted_restored_and_training_completes(ray_local, tmp_path) -> None:
    """The members' process killed (both members' learners and first rollout workers share
    one: 2 CPUs, 2 members per learner), then one of the buffer's two replay shards once it
    has been snapshotted: each comes back (each learner and the shard from their snapshots),
    the other shard goes on, what was lost is counted once, and the run ends at
    ``max_steps``."""
    ray = ray_local
    coord, result, handles = start(ray, tmp_path, "buffer.snapshot_interval_s=0.5",
                                   "population.members_per_learner=2", "buffer.shards=2")
    try:
        worker, learner = handles["workers"][1][0], handles["learners"][1]
        other, buffer = handles["shards"]
        other_incarnation = ray.get(other.incarnation.remote())
        before = ray.get(learner.info.remote())
        assert ray.get(worker.info.remote())["pid"] == before["pid"]  # colocated
        assert ray.get(handles["learners"][0].info.remote())["pid"] == before["pid"]  # hosted
        os.kill(before["pid"], signal.SIGKILL)
        time.sleep(1.0)  # a buffer snapshot is taken meanwhile
        buffer_incarnation = ray.get(buffer.incarnation.remote())
        ray.kill(buffer, no_restart=False)  # its process killed; Ray restarts it
        assert ray.get(coord.progress.remote())["stop_reason"] == "running", "killed too late"
        summary = finish(ray, coord, result)
        faults, events = summary["faults"], summary["events"]
        assert (faults["worker_restarts"], faults["learner_restarts"],
                faults["buffer_restarts"]) == (2, 2, 1), faults

        # the members: a new process, each learner restored from its own snapshot and learning
        # on, the chunks their workers were collecting (if any) lost and counted
        after = ray.get(learner.info.remote())
        assert after["pid"] != before["pid"] and after["updates"] > 0
        assert ray.get(worker.info.remote())["pid"] == after["pid"]
        restored = [e for e in events if e.get("fault") == "learner restarted"]
        assert sorted(e["member"] for e in restored) == [0, 1]
        assert all(e["restored"] for e in restored)
        assert {e["member"] for e in events if e.get("fault") == "worker restarted"} == {0, 1}
        assert faults["lost_env_steps"] == 16 * faults["lost_chunks"]  # chunk_steps * num_envs

        # the shard: rows restored from its snapshot, the rows lost since counted; the other
        # shard never restarted
        event = next(e for e in events if e.get("fault") == "buffer restarted")
        assert event["shards"] == [1]
        assert event["restored_rows"] > 0 and event["lost_rows"] == faults["buffer_lost_rows"]
        assert ray.get(buffer.incarnation.remote()) != buffer_incarnation
        assert ray.get(other.incarnation.remote()) == other_incarnation
        assert ray.get(buffer.stats.remote())["counter"] >= event["restored_rows"]
        assert ray.get(other.stats.remote())["counter"] > 0
    finally:
        ray.kill(coord)  # the actors' owner: they go with it (and free their CPUs)


def test_a_reply_lost_with_its_owner_is_asked_for_again(ray_local) -> None:
    """A call whose reply was lost (here: owned by a process that died, as when a node dies
    after answering) is made again by the fleet's retrying get, as a call to an actor that died
    is."""
    from ray.exceptions import ObjectLostError

    from distmarl.runtime.fleets.faults import gather_with_retry, get_with_retry

    ray = ray_local

    @ray.remote(num_cpus=0)
    class Owner:
        def put(self) -> list:
            return [ray.put(np.zeros(1 << 21))]  # owned by this process, in its store

    owner = Owner.remote()
    [lost] = ray.get(owner.put.remote())
    ray.kill(owner)
    deadline = time.monotonic() + 60
    while True:  # its objects go once Ray has seen it die
        try:
            ray.get(lost, timeout=60)
        except ObjectLostError:
            break
        assert time.monotonic() < deadline, "the object outlived its owner"
        time.sleep(0.2)
    replies = iter([lost, ray.put("answered")])
    assert get_with_retry(lambda: next(replies), delay_s=0.0) == "answered"
    replies = iter([lost, ray.put("answered again")])
    assert gather_with_retry([lambda: next(replies)]) == ["answered again"]
