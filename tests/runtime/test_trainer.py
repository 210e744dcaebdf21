"""A small population run, end to end: every part works together and the figures add up.

One run on a real local Ray (the off-policy family's end-to-end run) feeds most assertions;
the evolution modes and prioritised n-step replay run in process (``train(cfg, local=True)``);
what only Ray has (learners' GPU requests, calls in flight side by side) stays on Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distmarl.config import ExperimentConfig, load_config
from tests.runtime.test_local_fleet import assert_time_counted

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


def tiny(tmp_path: Path, **overrides: Any) -> ExperimentConfig:
    cfg = load_config(TINY, [f"tracking.directory={tmp_path}", *overrides.get("sets", [])])
    return cfg


@dataclass
class RayRun:
    """The Ray run's config, summary and directory, and what its actors answered: the
    learners' weight checksums as the run started and after it ended, the workers' ``info``,
    the buffer's ``stats`` and the member of every row it stored."""

    cfg: ExperimentConfig
    summary: dict[str, Any]
    tmp: Path
    actors: dict[str, Any] = field(default_factory=dict)


def actor_weight_sum(state: dict[str, Any]) -> float:
    """The sum of every actor weight of a learner's ``get_state()``: a fingerprint."""
    online = state["algo"]["networks"]["online"]
    return float(sum(t.double().sum() for name, weights in online.items()
                     if name.startswith("actor/") for t in weights.values()))


def watch_actors(coord: Any, seen: dict[str, Any], done: threading.Event) -> None:
    """Wait for the coordinator's actors (they exist once the run is set up) and read the
    learners' actor weights as the run starts."""
    import ray

    while not done.is_set():
        try:
            handles = ray.get(coord.handles.remote(), timeout=5)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayTaskError):
            done.wait(0.1)
            continue
        seen["handles"] = handles
        seen["before"] = [actor_weight_sum(ray.get(lr.get_state.remote()))
                          for lr in handles["learners"]]
        return


@pytest.fixture(scope="module")
def run(ray_local: Any, tmp_path_factory: pytest.TempPathFactory) -> RayRun:
    """One tiny run on Ray shared by the assertions below; its actors are read as it starts
    and after it ends (the coordinator, held here, keeps them alive until then; killing it
    frees their CPUs for the next Ray test)."""
    import ray

    from distmarl.runtime.driver.trainer import train

    tmp = tmp_path_factory.mktemp("tiny")
    cfg = tiny(tmp, sets=["tracking.mlflow=false"])
    seen: dict[str, Any] = {}
    done = threading.Event()
    watchers: list[threading.Thread] = []

    def on_coordinator(coord: Any) -> None:
        seen["coordinator"] = coord
        watchers.append(threading.Thread(target=watch_actors, args=(coord, seen, done),
                                         daemon=True))
        watchers[0].start()

    try:
        summary = train(cfg, run_dir=tmp / "run", summary_json=tmp / "summary.json",
                        show_progress=False, on_coordinator=on_coordinator)
    finally:
        done.set()
        for w in watchers:
            w.join(30)
    actors: dict[str, Any] = {"before": seen.get("before")}
    handles = seen.get("handles")
    if handles is not None:
        actors["after"] = [actor_weight_sum(ray.get(lr.get_state.remote()))
                           for lr in handles["learners"]]
        actors["infos"] = ray.get([w.info.remote() for ws in handles["workers"] for w in ws])
        actors["stats"] = ray.get(handles["buffer"].stats.remote())
        state = ray.get(handles["buffer"].state_dict.remote())
        actors["stored_members"] = set(np.unique(state["columns"]["__member__"]).tolist())
    ray.kill(seen["coordinator"])
    return RayRun(cfg, summary, tmp, actors)


@pytest.mark.ray
@pytest.mark.slow
def test_summary_json_holds_the_final_figures(run: RayRun) -> None:
    cfg, summary, tmp = run.cfg, run.summary, run.tmp
    written = json.loads((tmp / "summary.json").read_text())
    assert written["env_steps"] == summary["env_steps"]
    assert summary["stop_reason"] == "max_steps"
    steps = [m["env_steps"] for m in summary["members"]]
    chunk = cfg.training.chunk_steps * cfg.env.num_envs
    assert all(cfg.training.max_steps_per_member <= s < cfg.training.max_steps_per_member + 2 * chunk for s in steps)
    assert summary["env_steps"] == sum(steps)
    assert summary["generations"] == cfg.training.max_steps_per_member // cfg.evolution.evo_steps
    assert summary["env_steps_per_s"] > 0 and summary["wall_seconds"] > 0
    assert 0 < summary["setup_seconds"] < summary["wall_seconds"]
    assert_time_counted(summary["time"])  # every actor answered with its ledger
    # no learning call goes through the coordinator: it collects, settles, and hears reports
    assert set(summary["calls"]) == {"collect", "settle", "report"}
    assert summary["calls"]["settle"] >= summary["generations"]


@pytest.mark.ray
@pytest.mark.slow
def test_the_final_evaluation_scores_every_member_and_random_play_on_fixed_episodes(
        run: RayRun) -> None:
    cfg, summary = run.cfg, run.summary
    assert summary["final_episodes"] == cfg.evolution.final_episodes == 10
    assert summary["final_seed"] == cfg.evolution.final_seed
    scores = summary["final_scores"]
    assert len(scores) == cfg.population.size and all(np.isfinite(scores))
    latest = [m["fitness"][-1] for m in summary["members"]]  # eval_loop 1: the latest counts
    assert summary["elite"] == int(np.argmax(latest))
    assert summary["final_score"] == scores[summary["elite"]]
    assert summary["final_score_stderr"] > 0
    assert np.isfinite(summary["random_score"]) and summary["random_score"] < 0


@pytest.mark.ray
@pytest.mark.slow
def test_distmarl_evaluate_on_the_last_checkpoint_gives_the_final_score_again(run: RayRun) -> None:
    """The final evaluation's episodes are fixed: the elite's saved weights, scored again
    outside the run (``distmarl evaluate`` with its defaults), give the same number."""
    from distmarl.collect.evaluation import evaluate_checkpoint

    summary = run.summary
    again = evaluate_checkpoint(Path(summary["checkpoint"]))
    assert again["member"] == summary["elite"] and again["episodes"] == 10
    assert again["mean_score"] == pytest.approx(summary["final_score"], abs=1e-9)
    other = evaluate_checkpoint(Path(summary["checkpoint"]), seed=summary["final_seed"] + 1)
    assert other["mean_score"] != again["mean_score"]


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_run_resumes_in_process(run: RayRun) -> None:
    """A checkpoint is the same whichever fleet and grouping wrote it: the Ray run's (a
    learner per member) goes on in process with both members on one learner, its counters,
    lineage and members' states carried over."""
    import shutil

    from distmarl.runtime.driver.trainer import train

    resumed_dir = run.tmp / "resumed"
    shutil.copytree(run.tmp / "run", resumed_dir)
    cfg = run.cfg.model_copy(update={
        "training": run.cfg.training.model_copy(
            update={"max_steps_per_member": run.cfg.training.max_steps_per_member
                    + run.cfg.evolution.evo_steps}),
        "population": run.cfg.population.model_copy(update={"members_per_learner": 2})})
    again = train(cfg, resume=resumed_dir, show_progress=False, local=True)
    assert again["resumed_from"] and again["stop_reason"] == "max_steps"
    assert again["generations"] == run.summary["generations"] + 1
    assert again["env_steps"] > run.summary["env_steps"]
    for before, after in zip(run.summary["members"], again["members"]):
        assert after["fitness"][:len(before["fitness"])] == before["fitness"]
        assert after["updates"] > before["updates"]


@pytest.mark.ray
@pytest.mark.slow
def test_update_to_data_ratio_follows_learn_step(run: RayRun) -> None:
    cfg, summary = run.cfg, run.summary
    for m in summary["members"]:
        # one update per learn_step transitions once the buffer holds learning_starts rows
        learn_step = cfg.algorithm.hp.learn_step
        expected = (m["env_steps"] - cfg.replay.learning_starts) / learn_step
        assert expected * 0.7 <= m["updates"] <= m["env_steps"] / learn_step + 1, m


@pytest.mark.ray
@pytest.mark.slow
def test_fitness_recorded_and_evolution_happened(run: RayRun) -> None:
    summary = run.summary
    for m in summary["members"]:
        assert len(m["fitness"]) == summary["generations"]
        assert all(np.isfinite(m["fitness"]))
    assert summary["best_fitness"] == max(m["fitness"][-1] for m in summary["members"])
    mutated = [e for e in summary["events"] if e.get("mutation", "none") != "none"]
    assert mutated, "no mutation happened"
    assert summary["copies"], "no selection copied a member"
    for copy in summary["copies"]:
        assert copy["member"] != copy["source"]


@pytest.mark.ray
@pytest.mark.slow
def test_artifacts_and_checkpoint_written(run: RayRun) -> None:
    summary = run.summary
    run_dir = Path(summary["run_dir"])
    for name in ("config.yaml", "lineage.json", "fitness.png", "family_tree.png", "summary.json"):
        assert (run_dir / name).stat().st_size > 0, name
    lineage = json.loads((run_dir / "lineage.json").read_text())
    assert len(lineage["individuals"]) > 2
    assert Path(summary["checkpoint"]).exists()


@pytest.mark.ray
@pytest.mark.slow
def test_all_actor_kinds_alive_and_learning(run: RayRun) -> None:
    """The Ray run's actors: every learner's weights changed, every member's worker
    collected, the buffer holds rows of every member and counted every env step, and both
    learners sampled from it."""
    summary, actors = run.summary, run.actors
    assert actors["before"] is not None, "the coordinator never answered with its actors"
    assert all(a != b for a, b in zip(actors["after"], actors["before"])), \
        "learners' weights did not change"
    infos = actors["infos"]
    assert sorted(i["member"] for i in infos) == [0, 1] and all(i["env_steps"] > 0 for i in infos)
    assert actors["stored_members"] == {0, 1}, "the buffer did not receive rows from every member"
    assert actors["stats"]["counter"] == summary["env_steps"]
    assert set(actors["stats"]["consumers"]) == {"learner-0", "learner-1"}


def test_config_errors_are_clear(tmp_path: Path) -> None:
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


@pytest.mark.ray
@pytest.mark.slow
def test_learners_take_fractional_gpus_on_a_ray_with_logical_gpus(tmp_path: Path) -> None:
    """A separate Ray (own process) with one logical GPU: 2 learners at 0.5 GPU each."""
    script = textwrap.dedent(f"""
        import json, ray
        from distmarl.config import load_config
        from distmarl.runtime.driver.cluster import init_ray
        from distmarl.runtime.actors.host import HostActor, LearnerView
        from distmarl.runtime.fleets.resources import plan_resources
        from distmarl.factory import env_spaces
        init_ray(num_cpus=2, num_gpus=1, dashboard=False, log_to_driver=False)
        cfg = load_config({str(TINY)!r}, ["population.size=2", "resources.num_gpus_per_learner=0.5"])
        res = plan_resources(cfg.resources, cfg.population, ray.cluster_resources())
        spaces = env_spaces(cfg.env)
        kwargs = [dict(member=i, algo_cfg=cfg.algorithm, spaces=spaces, buffer=None, seed=0)
                  for i in range(2)]
        learners = [LearnerView(HostActor.options(**res.host(1)).remote([kw]), kw["member"])
                    for kw in kwargs]
        infos = ray.get([lr.info.remote() for lr in learners])
        print(json.dumps({{"learner": res.learner, "infos": infos,
                          "available": ray.available_resources().get("GPU", 0.0)}}))
        ray.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["learner"]["num_gpus"] == 0.5
    assert [i["resources"].get("GPU") for i in out["infos"]] == [0.5] * 2
    assert out["available"] == pytest.approx(0.0)
    assert all(i["device"] == "cpu" for i in out["infos"])  # no CUDA here: CPU
    assert [i["device_note"] for i in out["infos"]] == [
        f"learner {i} was given GPU ['0'] but torch sees no CUDA device: using CPU"
        for i in range(2)]


def test_asynchronous_evolution_completes_and_copies_only_from_the_top(tmp_path: Path) -> None:
    """``mode: async`` in process: each member evolves at its own boundary; every copy is
    recorded in the lineage."""
    from distmarl.runtime.driver.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "population.size=3",
                               "evolution.mode=async",
                               "evolution.bottom_frac=0.34", "evolution.top_frac=0.34",
                               "evolution.evo_steps=100", "training.max_steps_per_member=300",
                               "evolution.final_episodes=2"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= 300 and len(m["fitness"]) == 3
               for m in summary["members"]), summary["members"]
    assert summary["copies"], "no member copied another in 3 generations"
    lineage = json.loads((Path(summary["run_dir"]) / "lineage.json").read_text())
    copied = [i for i in lineage["individuals"] if i["parent_id"] is not None]
    assert len(copied) == len(summary["copies"])


def test_evolution_off_trains_members_apart_from_sampled_hyperparameters(tmp_path: Path
                                                                        ) -> None:
    """``mode: independent``: no copy, no mutation; ``initial_hp: sampled``: each member starts from
    its own draw from the ranges, and keeps it."""
    from distmarl.runtime.driver.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "population.size=3",
                               "evolution.mode=independent", "evolution.initial_hp=sampled",
                               "evolution.mutation.pretrain_mutation=true",
                               "training.max_steps_per_member=400", "evolution.final_episodes=4"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert summary["copies"] == []
    assert [e for e in summary["events"] if "mutation" in e] == []
    [start] = [e["values"] for e in summary["events"] if e.get("initial_hp") == "sampled"]
    for m, drawn in zip(summary["members"], start):
        assert len(m["fitness"]) == 2
        assert {k: m["hp"][k] for k in drawn} == drawn  # kept: nothing mutated them
        assert 1e-4 <= drawn["lr_actor"] <= 1e-2 and 16 <= drawn["batch_size"] <= 128
    assert len({d["lr_actor"] for d in start}) == 3
    assert len(summary["final_scores"]) == 3


def test_in_process_every_chunk_acts_with_its_learners_newest_weights(tmp_path: Path) -> None:
    """Many small publishes and two workers per member, in process (200 env steps a member):
    the learners learn after each turn's chunks are stored, so no chunk lags (on Ray they
    do, within a bound: ``test_colocation.py``)."""
    from distmarl.runtime.driver.trainer import train

    cfg = tiny(tmp_path, sets=["tracking.mlflow=false", "training.max_steps_per_member=200",
                               "training.weight_sync_updates=1", "training.chunk_steps=4",
                               "algorithm.hp.learn_step=1", "population.workers_per_member=2",
                               "replay.max_policy_lag=8"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert all(m["updates"] > 0 for m in summary["members"])
    assert [m["max_policy_lag_seen"] for m in summary["members"]] == [0, 0]


def test_prioritised_n_step_replay_learns_with_evolved_settings_and_checkpoints_priorities(
        tmp_path: Path) -> None:
    """Workers store 3-step rows; each learner's TD errors reach its own priorities (through
    its next sample call), its replay settings mutate like any hyperparameter, and the
    checkpoint carries the priorities."""
    from distmarl.checkpoint import load_checkpoint
    from distmarl.runtime.driver.trainer import train

    cfg = tiny(tmp_path, sets=[
        "tracking.mlflow=false", "replay.prioritized_replay=true", "replay.replay_ratio=0.5",
        "replay.n_step=3",
        "evolution.mutation.rl_hp=1.0", "evolution.mutation.architecture=0.0",
        "evolution.mutation.parameters=0.0", "evolution.mutation.mutate_elite=true",
        "evolution.hp_config={prioritized_replay_beta: {min: 0.1, max: 1.0}, "
        "replay_ratio: {min: 0.1, max: 0.9}}"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    states = load_checkpoint(tmp_path / "run" / "checkpoints").buffer_state
    assert states is not None
    [state] = states
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


@pytest.mark.slow
def test_multi_frequency_subpopulations_evolve_at_their_own_steps(tmp_path: Path) -> None:
    """A fast sub-population (every 100 env steps) and a slow one (every 200), 3 members each:
    each evolves when its own members reach their boundary, its loser cloning its winner
    every step, its middle slot open to better members of the other (weights only from the
    faster one)."""
    from distmarl.runtime.driver.trainer import train

    sets = ["tracking.mlflow=false", "population.size=6", "evolution.mode=multi_frequency",
            "evolution.subpopulations=[{size: 3, evo_steps: 100}, {size: 3, evo_steps: 200}]",
            "evolution.migration_frac=0.34", "evolution.final_episodes=2",
            "training.max_steps_per_member=600"]
    cfg = tiny(tmp_path, sets=sets)
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
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
    # resume with 200 more steps per member: each sub-population keeps its own cadence
    again = train(tiny(tmp_path, sets=[*sets[:-1], "training.max_steps_per_member=800"]),
                  resume=tmp_path / "run", show_progress=False, local=True)
    assert [len(m["fitness"]) for m in again["members"]] == [8, 8, 8, 4, 4, 4]
