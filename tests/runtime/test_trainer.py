"""A small population run on a real local Ray: every part works together and the figures add up."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


def tiny(tmp_path, **overrides):
    cfg = load_config(TINY, [f"tracking.directory={tmp_path}", *overrides.get("sets", [])])
    return cfg


@pytest.fixture(scope="module")
def run(ray_local, tmp_path_factory):
    """One tiny run shared by the assertions below (a run costs ~20 s here)."""
    from distmarl.runtime.trainer import train

    tmp = tmp_path_factory.mktemp("tiny")
    cfg = tiny(tmp, sets=["tracking.mlflow=false"])
    summary = train(cfg, run_dir=tmp / "run", summary_json=tmp / "summary.json", show_progress=False)
    return cfg, summary, tmp


def test_summary_json_holds_the_final_figures(run) -> None:
    cfg, summary, tmp = run
    written = json.loads((tmp / "summary.json").read_text())
    assert written["env_steps"] == summary["env_steps"]
    assert summary["stop_reason"] == "max_steps"
    steps = [m["env_steps"] for m in summary["members"]]
    chunk = cfg.training.chunk_steps * cfg.env.num_envs
    assert all(cfg.training.max_steps <= s < cfg.training.max_steps + 2 * chunk for s in steps)
    assert summary["env_steps"] == sum(steps)
    assert summary["generations"] == cfg.training.max_steps // cfg.evolution.evo_steps
    assert summary["env_steps_per_s"] > 0 and summary["wall_seconds"] > 0
    assert 0 < summary["setup_seconds"] < summary["wall_seconds"]


def test_the_final_evaluation_scores_every_member_and_random_play_on_fixed_episodes(run) -> None:
    cfg, summary, _ = run
    assert summary["final_episodes"] == cfg.evolution.final_episodes == 10
    assert summary["final_seed"] == cfg.evolution.final_seed
    scores = summary["final_scores"]
    assert len(scores) == cfg.population.size and all(np.isfinite(scores))
    latest = [m["fitness"][-1] for m in summary["members"]]  # eval_loop 1: the latest counts
    assert summary["elite"] == int(np.argmax(latest))
    assert summary["final_score"] == scores[summary["elite"]]
    assert summary["final_score_stderr"] > 0
    assert np.isfinite(summary["random_score"]) and summary["random_score"] < 0


def test_distmarl_evaluate_on_the_last_checkpoint_gives_the_final_score_again(run) -> None:
    """The final evaluation's episodes are fixed: the elite's saved weights, scored again
    outside the run (``distmarl evaluate`` with its defaults), give the same number."""
    from distmarl.collect.evaluation import evaluate_checkpoint

    _, summary, _ = run
    again = evaluate_checkpoint(Path(summary["checkpoint"]))
    assert again["member"] == summary["elite"] and again["episodes"] == 10
    assert again["mean_score"] == pytest.approx(summary["final_score"], abs=1e-9)
    other = evaluate_checkpoint(Path(summary["checkpoint"]), seed=summary["final_seed"] + 1)
    assert other["mean_score"] != again["mean_score"]


def test_update_to_data_ratio_follows_learn_step(run) -> None:
    cfg, summary, _ = run
    for m in summary["members"]:
        # one update per learn_step transitions once the buffer holds learning_starts rows
        learn_step = cfg.algorithm.hp.learn_step
        expected = (m["env_steps"] - cfg.buffer.learning_starts) / learn_step
        assert expected * 0.7 <= m["updates"] <= m["env_steps"] / learn_step + 1, m


def test_fitness_recorded_and_evolution_happened(run) -> None:
    _, summary, _ = run
    for m in summary["members"]:
        assert len(m["fitness"]) == summary["generations"]
        assert all(np.isfinite(m["fitness"]))
    assert summary["best_fitness"] == max(m["fitness"][-1] for m in summary["members"])
    mutated = [e for e in summary["events"] if e.get("mutation", "none") != "none"]
    assert mutated, "no mutation happened"
    assert summary["copies"], "no selection copied a member"
    for copy in summary["copies"]:  # right after the copy the weights equal the source's
        assert copy["copy_checksum"] == copy["source_checksum"]
        assert copy["member"] != copy["source"]


def test_artifacts_and_checkpoint_written(run) -> None:
    _, summary, _ = run
    run_dir = Path(summary["run_dir"])
    for name in ("config.yaml", "lineage.json", "fitness.png", "family_tree.png", "summary.json"):
        assert (run_dir / name).stat().st_size > 0, name
    lineage = json.loads((run_dir / "lineage.json").read_text())
    assert len(lineage["individuals"]) > 2
    assert Path(summary["checkpoint"]).exists()


def test_all_actor_kinds_alive_and_learning(ray_local, tmp_path) -> None:
    """Drive the coordinator by hand to look at its actors mid-run."""
    import ray

    from distmarl.runtime.coordinator import CoordinatorActor

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "training.max_steps=400"])
    coord = CoordinatorActor.remote(json.loads(cfg.model_dump_json()), str(tmp_path / "run"))
    result = coord.run.remote()
    handles = None
    for _ in range(200):
        try:
            handles = ray.get(coord.handles.remote(), timeout=5)
            break
        except (ray.exceptions.GetTimeoutError, AttributeError, ray.exceptions.RayTaskError):
            import time

            time.sleep(0.2)
    assert handles is not None
    before = ray.get([lr.weights_checksum.remote() for lr in handles["learners"]])
    summary = ray.get(result, timeout=300)
    after = ray.get([lr.weights_checksum.remote() for lr in handles["learners"]])
    assert all(a != b for a, b in zip(after, before)), "learners' weights did not change"
    infos = ray.get([w.info.remote() for ws in handles["workers"] for w in ws])
    assert sorted(i["member"] for i in infos) == [0, 1] and all(i["env_steps"] > 0 for i in infos)
    stats = ray.get(handles["buffer"].stats.remote())
    stored = ray.get(handles["buffer"].state_dict.remote())["columns"]["__member__"]
    assert set(np.unique(stored)) == {0, 1}, "the buffer did not receive rows from every member"
    assert stats["counter"] == summary["env_steps"]
    assert set(stats["consumers"]) == {"learner-0", "learner-1"}
    ray.kill(coord)


def test_config_errors_are_clear(tmp_path) -> None:
    from distmarl.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("population: {size: 2}\nevolution: {tournamnet: {size: 2}}\n")
    proc = subprocess.run([sys.executable, "-m", "distmarl.cli", "train", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "unknown key 'tournamnet'; did you mean 'tournament'?" in proc.stderr
    assert main(["train", str(tmp_path / "missing.yaml")]) == 2
    assert main(["config", "show", str(TINY), "--set", "buffer.capacity=-3"]) == 2
    proc = subprocess.run(
        [sys.executable, "-m", "distmarl.cli", "config", "show", str(TINY), "--set",
         "evolution.hp_config.lr_actor.min=0.5"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "min 0.5 is greater than max 0.01" in proc.stderr


def test_learners_take_fractional_gpus_on_a_ray_with_logical_gpus(tmp_path) -> None:
    """A separate Ray (own process) with one logical GPU: 4 learners at 0.25 GPU each."""
    script = textwrap.dedent(f"""
        import json, ray
        from distmarl.config import load_config
        from distmarl.runtime.cluster import init_ray
        from distmarl.runtime.actors.learner import LearnerActor
        from distmarl.runtime.resources import plan_resources
        from distmarl.factory import env_spaces
        init_ray(num_cpus=2, num_gpus=1, dashboard=False, log_to_driver=False)
        cfg = load_config({str(TINY)!r}, ["population.size=4", "resources.num_gpus_per_learner=0.25"])
        res = plan_resources(cfg.resources, cfg.population, ray.cluster_resources())
        spaces = env_spaces(cfg.env)
        learners = [LearnerActor.options(**res.learner).remote(i, cfg.algorithm, spaces, None, 0)
                    for i in range(4)]
        infos = ray.get([lr.info.remote() for lr in learners])
        print(json.dumps({{"learner": res.learner, "infos": infos,
                          "available": ray.available_resources().get("GPU", 0.0)}}))
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["learner"]["num_gpus"] == 0.25
    assert [i["resources"].get("GPU") for i in out["infos"]] == [0.25] * 4
    assert out["available"] == pytest.approx(0.0)
    assert all(i["device"] == "cpu" for i in out["infos"])  # no CUDA here: CPU
    assert [i["device_note"] for i in out["infos"]] == [
        f"learner {i} was given GPU ['0'] but torch sees no CUDA device: using CPU"
        for i in range(4)]


def test_asynchronous_evolution_completes_and_copies_only_from_the_top(ray_local, tmp_path) -> None:
    from distmarl.runtime.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "population.size=3",
                               "evolution.mode=async", "evolution.tournament.size=2",
                               "evolution.bottom_frac=0.34", "evolution.top_frac=0.34",
                               "training.max_steps=600"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 600 and len(m["fitness"]) == 3 for m in summary["members"]), summary["members"]
    for copy in summary["copies"]:  # the copier was the worst, its source the best, right then
        assert copy["copy_checksum"] == copy["source_checksum"]
    lineage = json.loads((Path(summary["run_dir"]) / "lineage.json").read_text())
    copied = [i for i in lineage["individuals"] if i["parent_id"] is not None]
    assert len(copied) == len(summary["copies"])


def test_evolution_off_trains_members_apart_from_sampled_hyperparameters(ray_local,
                                                                        tmp_path) -> None:
    """``mode: independent``: no copy, no mutation; ``initial_hp: sampled``: each member starts from
    its own draw from the ranges, and keeps it."""
    from distmarl.runtime.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "population.size=3",
                               "evolution.mode=independent", "evolution.initial_hp=sampled",
                               "evolution.mutation.pretrain_mutation=true",
                               "training.max_steps=400", "evolution.final_episodes=4"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False)
    assert summary["copies"] == []
    assert [e for e in summary["events"] if "mutation" in e] == []
    [start] = [e["values"] for e in summary["events"] if e.get("initial_hp") == "sampled"]
    for m, drawn in zip(summary["members"], start):
        assert len(m["fitness"]) == 2
        assert {k: m["hp"][k] for k in drawn} == drawn  # kept: nothing mutated them
        assert 1e-4 <= drawn["lr_actor"] <= 1e-2 and 16 <= drawn["batch_size"] <= 128
    assert len({d["lr_actor"] for d in start}) == 3
    assert len(summary["final_scores"]) == 3


@pytest.mark.parametrize("max_lag", [0, 8])
def test_policy_lag_is_bounded_by_max_policy_lag(ray_local, tmp_path, max_lag: int) -> None:
    """Many small publishes (one per train call) and two workers per member collecting at
    once: with max_policy_lag 0 no chunk lags its learner's newest weights; with 8 some do
    (the bound is what holds the first run's lag at 0)."""
    from distmarl.runtime.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "training.max_steps=400",
                               "training.weight_sync_updates=1", "training.chunk_steps=4",
                               "algorithm.hp.learn_step=1", "population.workers_per_member=2",
                               f"training.max_policy_lag={max_lag}"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False)
    lags = [m["max_policy_lag_seen"] for m in summary["members"]]
    assert all(m["updates"] > 0 for m in summary["members"])
    if max_lag == 0:
        assert lags == [0, 0]
    else:
        assert 1 <= max(lags) <= max_lag


def test_prioritised_n_step_replay_learns_with_evolved_settings_and_checkpoints_priorities(
        ray_local, tmp_path) -> None:
    """Workers store 3-step rows; each learner's TD errors reach its own priorities (through
    its next sample call), its replay settings mutate like any hyperparameter, and the
    checkpoint carries the priorities."""
    from distmarl.checkpoint import load_checkpoint
    from distmarl.runtime.trainer import train

    cfg = tiny(tmp_path, sets=[
        "tracking.mlflow=false", "buffer.prioritized_replay=true", "buffer.replay_ratio=0.5",
        "buffer.n_step=3",
        "evolution.mutation.rl_hp=1.0", "evolution.mutation.architecture=0.0",
        "evolution.mutation.parameters=0.0", "evolution.mutation.mutate_elite=true",
        "evolution.hp_config={prioritized_replay_beta: {min: 0.1, max: 1.0}, "
        "replay_ratio: {min: 0.1, max: 0.9}}"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False)
    state = load_checkpoint(tmp_path / "run" / "checkpoints").buffer_state
    assert state is not None
    assert set(state["meta"]["priorities"]) == {"learner-0", "learner-1"}
    cols = state["columns"]
    assert cols["speaker_0/reward"].shape[1:] == (3,)
    assert set(np.unique(cols["speaker_0/n_steps"])) <= {1, 2, 3}
    assert (cols["speaker_0/n_steps"] == 3).mean() > 0.8  # 25-step episodes: few cut short
    for name in ("learner-0", "learner-1"):
        p = np.asarray(state["columns"][f"__priority__/{name}"])
        assert len(p) == len(state["columns"]["__member__"])
        assert len(np.unique(p)) > 10, f"{name}'s TD errors never reached its priorities"
    hps = [m["hp"] for m in summary["members"]]
    changed = [(h["prioritized_replay_beta"], h["replay_ratio"]) != (0.4, 0.5) for h in hps]
    assert any(changed), "no member's replay settings were mutated"


def test_multi_frequency_subpopulations_evolve_at_their_own_steps(ray_local, tmp_path) -> None:
    """A fast sub-population (every 200 env steps) and a slow one (every 400), 3 members each:
    each evolves when its own members reach their boundary, its loser cloning its winner
    every step, its middle slot open to better members of the other (weights only from the
    faster one)."""
    from distmarl.runtime.trainer import train

    sets = ["tracking.mlflow=false", "population.size=6", "evolution.mode=multi_frequency",
            "evolution.subpopulations=[{size: 3, evo_steps: 200}, {size: 3, evo_steps: 400}]",
            "evolution.migration_frac=0.34", "training.max_steps=1200"]
    cfg = tiny(tmp_path, sets=sets)
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False)
    assert [len(m["fitness"]) for m in summary["members"]] == [6, 6, 6, 3, 3, 3]
    migrations = [e for e in summary["events"] if "migrated_from" in e]
    fast = {0, 1, 2}
    # with 3 members a side, a step with no better member anywhere on the other side is rare
    assert migrations, "no member migrated in 7 sub-population steps"
    for e in migrations:
        assert (e["member"] in fast) != (e["migrated_from"] in fast)
        assert e["weights_only"] == (e["migrated_from"] in fast)
    into = [c["member"] for c in summary["copies"]]
    clones_fast = sum(m in fast for m in into) - sum(e["member"] in fast for e in migrations)
    clones_slow = sum(m not in fast for m in into) - sum(e["member"] not in fast
                                                         for e in migrations)
    assert (clones_fast, clones_slow) == (5, 2)  # one loser per step: 5 fast, 2 slow steps
    assert summary["stop_reason"] == "max_steps"
    # resume with 400 more steps per member: each sub-population keeps its own cadence
    again = train(tiny(tmp_path, sets=[*sets[:-1], "training.max_steps=1600"]),
                  resume=tmp_path / "run", show_progress=False)
    assert [len(m["fitness"]) for m in again["members"]] == [8, 8, 8, 4, 4, 4]
