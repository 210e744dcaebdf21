"""On-policy members (IPPO, MAPPO): evolution, tracking, checkpoints and resume as for
off-policy members (in process, ``local=True``); and on Ray, with workers and learners side by
side as actors, whole fragments, each learned once by its own member's learner."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from distmarl.config import load_config
from tests.fakes import tensors
from tests.tracking.test_mlflow_run import no_process_tracking_uri  # noqa: F401  (autouse)

pytestmark = [pytest.mark.slow]

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"

#: tiny.yaml as an on-policy population: fragments of 16 steps * 2 envs = 32 rows; rl_hp
#: mutations may change learn_step, so fragment sizes change between generations.
ON_POLICY = ["algorithm.hp={batch_size: 32, learn_step: 16, update_epochs: 2}",
             "evolution.hp_config={lr: {min: 0.0001, max: 0.01}, "
             "learn_step: {min: 8, max: 32, dtype: int}}",
             "evolution.mutation.rl_hp=0.6"]


def on_policy_config(tmp_path: Path, algorithm: str, *sets: str):
    return load_config(TINY, [f"tracking.directory={tmp_path}", f"algorithm.name={algorithm}",
                              *ON_POLICY, *sets])


def handles_of(ray, coord) -> dict:
    for _ in range(300):
        try:
            return ray.get(coord.handles.remote(), timeout=5)
        except (ray.exceptions.GetTimeoutError, AttributeError, ray.exceptions.RayTaskError):
            time.sleep(0.2)
    raise AssertionError("the coordinator never built its actors")


def test_mappo_population_trains_evolves_resumes_and_is_tracked(tmp_path: Path) -> None:
    """A MAPPO population in process: two generations tracked with an elite model, resumed
    for a third; evaluations repeat from the checkpoint, members copy others, the
    checkpoint holds no fragments, and the value networks read the env's state."""
    from distmarl.checkpoint import load_checkpoint
    from distmarl.collect.evaluation import evaluate_checkpoint
    from distmarl.factory import env_spaces, make_algorithm
    from distmarl.runtime.driver.trainer import train

    short = ["evolution.evo_steps=100"]
    first = train(on_policy_config(tmp_path, "MAPPO", *short, "training.max_steps_per_member=200"),
                  run_dir=tmp_path / "run", show_progress=False, local=True)
    assert first["generations"] == 2
    assert first["mlflow"]["parent"] and first["elite_model_uri"]  # tracked, elite logged
    cfg = on_policy_config(tmp_path, "MAPPO", *short, "training.max_steps_per_member=300",
                           "tracking.mlflow=false",  # (MLflow's resume: tests/tracking)
                           "evolution.eval_explore=true")
    summary = train(cfg, resume=tmp_path / "run", show_progress=False,
                    local=True)  # one generation more
    assert summary["stop_reason"] == "max_steps" and summary["resumed_from"]
    # sampled evaluations are seeded by their episodes: the checkpoint scores the same again
    again = evaluate_checkpoint(Path(summary["checkpoint"]))
    assert again["mean_score"] == pytest.approx(summary["final_score"], abs=1e-9)
    assert summary["generations"] == 3
    for before, m in zip(first["members"], summary["members"]):
        assert m["env_steps"] >= 300 and m["updates"] > before["updates"] > 0
        assert len(m["fitness"]) == 3 and all(np.isfinite(m["fitness"]))
        assert m["fitness"][:2] == before["fitness"]
    assert summary["copies"], "no selection copied a member"
    ckpt = load_checkpoint(Path(summary["checkpoint"]))
    # no fragments in the checkpoint: a resume drops waiting fragments, so none are written
    assert ckpt.buffer_state is None and not (Path(summary["checkpoint"]) / "buffer.arrow").exists()
    for member, state in enumerate(ckpt.members):  # learned: weights moved from their start
        fresh = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=cfg.seed * 1009 + member)
        assert state["algo"]["algorithm"] == "MAPPO" and state["algo"]["learn_steps"] > 0
        # the value networks read [own obs, env.state()] (3 + 14 and 11 + 14 wide), learned
        # from fragments that carried the state (they would raise without it)
        online = state["algo"]["networks"]["online"]
        assert online["value/speaker"]["encoder.linears.0.weight"].shape[1] == 17
        assert online["value/listener"]["encoder.linears.0.weight"].shape[1] == 25
        start = dict(tensors(fresh.state_dict()["networks"]["online"]))
        end = dict(tensors(state["algo"]["networks"]["online"]))
        assert start and end
        assert any(k not in end or v.shape != end[k].shape or not torch.equal(v, end[k])
                   for k, v in start.items())


@pytest.mark.ray
def test_each_fragment_is_learned_once_by_its_own_member(ray_local, tmp_path) -> None:
    """On Ray (the on-policy family's run end to end on actors, both members' learners in one
    process): two workers per member write interleaved fragments; every row a member's workers
    wrote is learned exactly once, by that member's learner, in order, in whole fragments."""
    ray = ray_local
    from distmarl.runtime.coordinator.run import CoordinatorActor

    cfg = on_policy_config(tmp_path, "IPPO", "tracking.mlflow=false", "training.max_steps_per_member=400",
                           "evolution.final_episodes=2",
                           "population.workers_per_member=2",
                           "population.members_per_learner=2",
                           "evolution.hp_config={learn_step: {min: 8, max: 32, dtype: int}}",
                           "evolution.mutation={no_mutation: 0.0, architecture: 0.0, "
                           "parameters: 0.0, rl_hp: 1.0}")  # every member's learn_step changes
    coord = CoordinatorActor.remote(json.loads(cfg.model_dump_json()), str(tmp_path / "run"))
    result = coord.run.remote()
    handles = handles_of(ray, coord)
    summary = ray.get(result, timeout=300)
    assert summary["stop_reason"] == "max_steps"
    members = ray.get(handles["buffer"].state_dict.remote())["columns"]["__member__"]
    assert len(members) == summary["env_steps"]  # nothing overwritten: row i is global row i
    for member, learner in enumerate(handles["learners"]):
        used = ray.get(learner.used_fragments.remote())
        rows = np.concatenate([np.arange(a, b) for a, b in used])
        assert len(np.unique(rows)) == len(rows), "a row was learned twice"
        np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(members == member))
        assert [a for a, _ in used] == sorted(a for a, _ in used)  # oldest first
        assert all((b - a) % cfg.env.num_envs == 0 for a, b in used)
        assert len(used) == summary["members"][member]["updates"]  # one update per fragment
        assert ray.get(learner.info.remote())["discarded_rows"] == 0
    sizes = {b - a for lr in handles["learners"] for a, b in ray.get(lr.used_fragments.remote())}
    assert len(sizes) > 1, "learn_step mutations should have changed the fragment size"
    ray.kill(coord)
