"""Mixed-algorithm populations, in process (``train(cfg, local=True)``): each member learns
with its own algorithm from the shared buffer, copies stay within an algorithm (or convert a
member to its winner's), and the summary, the checkpoint and the MLflow-bound
hyperparameters name each member's algorithm."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distmarl.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "examples" / "configs"


def test_maddpg_and_matd3_members_share_the_buffer_and_copy_only_their_own(tmp_path: Path
                                                                         ) -> None:
    from distmarl.checkpoint import load_checkpoint
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(CONFIGS / "tiny.yaml", [
        f"tracking.directory={tmp_path}", "tracking.mlflow=false", "population.size=4",
        "population.members=[{algorithm: MADDPG, count: 2}, {algorithm: MATD3, count: 2, "
        "hp: {policy_freq: 3}}]", "evolution.evo_steps=100", "training.max_steps_per_member=400",
        "evolution.final_episodes=2", "evolution.mutation.rl_hp=1.0",
        "evolution.mutation.architecture=0.0", "evolution.mutation.parameters=0.0"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    algos = [m["algorithm"] for m in summary["members"]]
    assert algos == ["MADDPG", "MADDPG", "MATD3", "MATD3"]
    assert summary["members"][2]["hp"]["policy_freq"] == 3
    assert "policy_freq" not in summary["members"][0]["hp"]
    assert all(m["updates"] > 0 for m in summary["members"])
    assert summary["copies"], "no member copied another in 4 generations"
    for c in summary["copies"]:
        assert algos[c["member"]] == algos[c["source"]], f"a copy across algorithms: {c}"
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints", with_buffer=False)
    assert [m["algo"]["algorithm"] for m in ckpt.members] == algos
    lineage = ckpt.meta["lineage"]["individuals"]
    assert {(i["member"], i["algorithm"]) for i in lineage} == set(enumerate(algos))
    assert np.isfinite(summary["final_score"])


def test_ippo_members_record_the_state_mappo_members_read(tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(CONFIGS / "spread_mappo.yaml", [
        f"tracking.directory={tmp_path}", "tracking.mlflow=false", "env.num_envs=2",
        "population.size=2", "evolution.tournament.size=1", "evolution.evo_steps=256",
        "evolution.final_episodes=4", "evolution.eval_episodes=1", "training.max_steps_per_member=512",
        "algorithm.hp.learn_step=32",
        "population.members=[{algorithm: IPPO, count: 1}, {algorithm: MAPPO, count: 1}]"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert [m["algorithm"] for m in summary["members"]] == ["IPPO", "MAPPO"]
    assert all(m["updates"] >= 8 for m in summary["members"])  # 8 fragments of 32 x 2 steps
    assert summary["copies"] == []  # one member per algorithm: nobody to copy


def test_a_converting_population_rebuilds_a_member_for_its_winners_algorithm(tmp_path: Path
                                                                           ) -> None:
    """With cross_algorithm: convert the tournament runs over all members; a member whose
    winner runs the other algorithm is rebuilt for it, loads the winner's state, and its
    workers act with the new algorithm."""
    from distmarl.checkpoint import load_checkpoint
    from distmarl.runtime.driver.trainer import train

    sets = [
        f"tracking.directory={tmp_path}", "tracking.mlflow=false", "population.size=4",
        "population.cross_algorithm=convert", "evolution.tournament.size=4",
        "population.members=[{algorithm: MADDPG, count: 2}, {algorithm: MATD3, count: 2}]",
        "evolution.mutation.no_mutation=1.0", "evolution.mutation.rl_hp=0.0",
        "evolution.mutation.architecture=0.0", "evolution.mutation.parameters=0.0",
        "evolution.evo_steps=100", "evolution.final_episodes=2"]
    cfg = load_config(CONFIGS / "tiny.yaml", [*sets, "training.max_steps_per_member=400"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    algos = [m["algorithm"] for m in summary["members"]]
    converted = [e for e in summary["events"] if "converted" in e]
    # a tournament of all 4 is won by the best member: the other algorithm's pair converts
    assert converted, "no member took another algorithm's state"
    expected = ["MADDPG", "MADDPG", "MATD3", "MATD3"]
    for e in converted:
        assert expected[e["member"]] == e["was"] != e["converted"]
        expected[e["member"]] = e["converted"]
    assert algos == expected and len(set(algos)) == 1
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints", with_buffer=False)
    assert [m["algo"]["algorithm"] for m in ckpt.members] == algos
    assert all(m["updates"] > 0 for m in summary["members"])
    # resume: the config still says 2 + 2, the checkpoint's converted members come back as
    # they were (their learners rebuild on load) and go on learning
    again = train(load_config(CONFIGS / "tiny.yaml", [*sets, "training.max_steps_per_member=500"]),
                  resume=tmp_path / "run", show_progress=False, local=True)
    assert again["resumed_from"]
    assert [m["algorithm"] for m in again["members"]] == algos
    assert all(b["updates"] > a["updates"] for a, b in zip(summary["members"],
                                                            again["members"]))
