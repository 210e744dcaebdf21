"""The learning benchmark's measuring parts (benchmarks.learning.learning): the paired difference
between two algorithms, and saved members scoring exactly as they did when trained."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.learning import learning

ROOT = Path(__file__).resolve().parents[1]

SPREAD = ROOT / "examples" / "configs" / "spread_mappo.yaml"


def _result(algo: str, seed: int, mean: float | None) -> dict:
    return {"algo": algo, "seed": seed,
            "final_eval": None if mean is None else {"mean": mean, "std": 1.0, "episodes": 8}}


def test_paired_difference_is_second_minus_first_over_shared_seeds() -> None:
    results = [_result("IPPO", 0, -50.0), _result("IPPO", 1, -48.0), _result("IPPO", 2, -47.0),
               _result("MAPPO", 0, -49.0), _result("MAPPO", 1, -51.0), _result("MAPPO", 3, -40.0),
               _result("MAPPO", 2, None)]
    d = learning.paired_difference(results, "IPPO", "MAPPO")
    # seed 2 has no MAPPO score and seed 3 no IPPO run: only seeds 0 and 1 pair up
    assert d["seeds"] == [0, 1] and d["differences"] == [1.0, -3.0]
    assert d["mean"] == pytest.approx(-1.0)
    assert d["se"] == pytest.approx(2.0)  # sample std 2*sqrt(2), over sqrt(2)
    one = learning.paired_difference(results[:1] + results[3:4], "IPPO", "MAPPO")
    assert one["differences"] == [1.0] and one["se"] is None
    assert learning.paired_difference(results, "IPPO", "MATD3") is None
    # the report's line: the last algorithm named against the first, a repeat counted once
    assert learning.last_minus_first(results, ["IPPO", "MAPPO", "IPPO"]) == {
        "first": "IPPO", "second": "MAPPO", **d}
    assert learning.last_minus_first(results, ["IPPO", "IPPO"]) is None


def test_a_saved_member_rescores_to_its_trained_score(tmp_path: Path) -> None:
    sets = ("env.num_envs=2", "algorithm.hp.learn_step=16", "algorithm.hp.batch_size=32")
    result = learning.run_one("MAPPO", 3, 64, 0, SPREAD, sets, final_episodes=6,
                              save_dir=tmp_path)
    assert result["saved"] == str(tmp_path / "MAPPO_seed3.pt") and result["updates"] == 2
    assert result["final_eval"]["episodes"] == 6
    again = learning.rescore(tmp_path, SPREAD, sets, episodes=6)
    assert [(r["algo"], r["seed"]) for r in again] == [("MAPPO", 3)]
    assert again[0]["final_eval"] == result["final_eval"]
    # a fresh member of the same seed scores differently: the saved weights were used
    fresh = learning.load("MAPPO", SPREAD, sets)
    from distmarl.factory import env_spaces, make_algorithm

    untrained = learning.score_policy(fresh, make_algorithm(fresh.algorithm,
                                                            env_spaces(fresh.env), seed=3), 6)
    assert untrained["mean"] != result["final_eval"]["mean"]


def test_rescore_names_the_directory_without_members(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        learning.rescore(tmp_path, SPREAD)


def test_final_episodes_below_one_is_refused_by_name() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "benchmarks.learning.learning",
                          "--final-episodes", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--final-episodes must be >= 1, got 0" in out.stderr

