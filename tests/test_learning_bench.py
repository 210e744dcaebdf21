"""The learning benchmark (benchmarks.learning.learning): the paired difference between two
algorithms, and its runs trained as a sweep, their members scoring again exactly as they did."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.learning import learning
from distmarl.config import ConfigError, load_config
from distmarl.studies.plan import claim

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


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A learning benchmark's folder: MAPPO, seed 3, 64 env steps, through the sweep."""
    out = tmp_path_factory.mktemp("learning") / "out"
    assert learning.main(["--config", str(SPREAD), "--algos", "MAPPO", "--seeds", "3",
                          "--steps", "64", "--eval-every", "32", "--final-episodes", "6",
                          "--out", str(out), *SETS]) == 0
    return out


SETS = [a for s in ("env.num_envs=2", "algorithm.hp.learn_step=16", "algorithm.hp.batch_size=32")
        for a in ("--set", s)]


def test_a_run_is_a_sweep_whose_member_rescores_to_its_trained_score(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.learning import spread_reference

    run = trained / "MAPPO" / "seed-3"
    summary = json.loads((run / "summary.json").read_text())
    assert json.loads((run / "study.json").read_text())["arm"] == "MAPPO"
    assert summary["env_steps"] >= 64 and len(summary["members"]) == 1
    assert learning.main(["--config", str(SPREAD), "--algos", "MAPPO", "--seeds", "3",
                          "--steps", "64", "--eval-every", "32", "--final-episodes", "6",
                          "--out", str(trained), "--rescore", *SETS]) == 0
    assert f"MAPPO      seed   3: {summary['final_score']:.2f}" in capsys.readouterr().out
    # the member comes back with its weights: on the run's own final episodes it scores its
    # final score again (a fresh member scores otherwise)
    members = spread_reference.saved_members(trained)
    assert list(members) == ["MAPPO seed 3"]
    cfg = load_config(SPREAD, ["algorithm.name=MAPPO", "env.num_envs=2"])
    again = learning.fixed_score(cfg, members["MAPPO seed 3"], 6)
    assert again["mean"] == pytest.approx(summary["final_score"])


def test_a_folder_holding_other_runs_is_refused_naming_the_arm(
        trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import exit_status

    other = ["--config", str(SPREAD), "--algos", "MAPPO", "--seeds", "3", "--steps", "64",
             "--eval-every", "32", "--final-episodes", "6", "--out", str(trained),
             "--set", "env.num_envs=4"]
    assert exit_status(lambda: learning.main(other)) == 2
    assert f"error: --out {trained} holds arm MAPPO run with" in capsys.readouterr().err


def test_rescore_names_the_folder_without_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"--out {tmp_path}: no sweep there"):
        learning.rescore(tmp_path, 6)
    claim(tmp_path, learning.plan(["MAPPO"], [0], 64, 32, 6, SPREAD))
    with pytest.raises(FileNotFoundError, match=f"no finished runs in {tmp_path}"):
        learning.rescore(tmp_path, 6)


def test_final_episodes_below_one_is_refused_by_name() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "benchmarks.learning.learning",
                          "--final-episodes", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--final-episodes must be >= 1, got 0" in out.stderr
