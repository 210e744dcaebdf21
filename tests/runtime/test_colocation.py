"""Colocation: a member's learner and its first rollout worker in one process where cores are
few; each role's calls stay in order, the two roles' calls run side by side."""

from __future__ import annotations

import pytest

from distmarl.config import load_config
from distmarl.runtime.fleets.resources import colocates, plan_resources
from tests.tracking.test_mlflow_run import TINY


def test_auto_colocates_where_cores_are_fewer_than_a_learner_and_worker_per_member() -> None:
    assert colocates("auto", members=4, cluster={"CPU": 2.0})
    assert colocates("auto", members=4, cluster={"CPU": 7.0})
    assert not colocates("auto", members=4, cluster={"CPU": 8.0})
    assert colocates(True, members=1, cluster={"CPU": 64.0})
    assert not colocates(False, members=64, cluster={"CPU": 2.0})
    cfg = load_config(TINY, ["resources.num_cpus_per_learner=0.5",
                             "resources.num_cpus_per_worker=0.25"])
    res = plan_resources(cfg.resources, cfg.population, {"CPU": 2.0})
    assert res.colocate and res.host(1) == {"num_cpus": 0.75}
    assert res.host(3) == {"num_cpus": 2.25}
    assert not plan_resources(cfg.resources, cfg.population, {"CPU": 16.0}).colocate


def test_views_offer_only_their_roles_methods_and_name_their_member() -> None:
    from distmarl.runtime.actors.host import LearnerView, WorkerView

    class Method:
        def __init__(self, role: str) -> None:
            self.role = role

        def remote(self, *args: object) -> tuple[object, ...]:
            return (self.role, *args)

    class Fake:
        learner, worker = Method("learner"), Method("worker")

    worker, learner = WorkerView(Fake(), 3), LearnerView(Fake(), 5)
    assert worker.collect.remote(10) == ("worker", 3, "collect", 10)
    assert worker.info.remote() == ("worker", 3, "info")
    assert learner.info.remote() == ("learner", 5, "info")
    assert learner.publish.remote() == ("learner", 5, "publish")
    with pytest.raises(AttributeError, match="no method 'train'"):
        _ = worker.train
    with pytest.raises(AttributeError, match="no method 'collect'"):
        _ = learner.collect


@pytest.mark.ray
def test_a_colocated_member_shares_its_process_with_worker_0_and_no_chunk_lags(
        ray_local, tmp_path) -> None:
    """On Ray, each member's learner and worker 0 in one process and worker 1 in its own, all
    busy side by side with many small publishes (one per update): with max_policy_lag 0 a
    member's chunk is stored only while its learner owes at most a round (32 updates), so a
    chunk lags its learner's newest weights by at most that and the updates its member's
    chunks in flight earn (2 workers x 8 updates), one version each."""
    import threading

    import ray

    from distmarl.runtime.coordinator.run import TrainingRun

    cfg = load_config(TINY, [f"tracking.directory={tmp_path}", "tracking.mlflow=false",
                             "resources.colocate=true", "population.workers_per_member=2",
                             "training.max_steps_per_member=400", "training.weight_sync_updates=1",
                             "training.chunk_steps=4", "algorithm.hp.learn_step=1",
                             "replay.max_policy_lag=0", "evolution.final_episodes=2"])
    run = TrainingRun(cfg, tmp_path / "run", None, None, threading.Event())
    fleet = run.fleet
    try:
        for learner, (first, second) in zip(fleet.learners, fleet.workers):
            pid = ray.get(learner.info.remote())["pid"]
            assert ray.get(first.info.remote())["pid"] == pid  # worker 0 shares the process
            assert ray.get(first.info.remote())["worker"] == 0
            assert ray.get(second.info.remote())["pid"] != pid  # the others have their own
        summary = run.run()
    finally:
        assert len(fleet.actors()) == 1 + 2 + 2  # the buffer, 2 members, 2 second workers
        for actor in fleet.actors():
            ray.kill(actor)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 400 and m["updates"] > 0 for m in summary["members"])
    assert summary["learner_devices"] == ["cpu", "cpu"]
    assert summary["final_score"] is not None
    assert all(m["max_policy_lag_seen"] <= 32 + 2 * 8 + 1 for m in summary["members"])


def test_learner_processes_ask_for_gpus_once_whatever_members_they_hold() -> None:
    cfg = load_config(TINY, ["population.size=4", "resources.num_gpus_per_learner=1",
                             "resources.num_cpus_per_learner=0.5"])
    cluster = {"CPU": 16.0, "GPU": 1.0}
    with pytest.raises(ValueError, match=r"num_gpus_per_learner=1.0 for 4 learners needs 4.0 "
                                         r"GPUs; the cluster has 1"):
        plan_resources(cfg.resources, cfg.population, cluster)
    res = plan_resources(cfg.resources, cfg.population, cluster, learners=1)
    assert res.host(4) == {"num_cpus": 2.0, "num_gpus": 1.0}
