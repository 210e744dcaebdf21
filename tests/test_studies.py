"""A study's statistics against rliable's on a stored score table, and ``distmarl report`` on
run directories (each as a run leaves it: ``summary.json`` and ``config.yaml``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from distmarl.cli import main
from distmarl.studies.report import STUDY_FILE, Report, find_runs
from distmarl.studies.stats import (
    improvement_interval,
    iqm,
    iqm_interval,
    probability_of_improvement,
)

REFERENCE = Path(__file__).parent / "data" / "studies" / "rliable_reference.json"


def test_iqm_and_probability_of_improvement_match_rliable_within_bootstrap_noise() -> None:
    ref = json.loads(REFERENCE.read_text())
    a, b = (np.array(ref["scores"][k]) for k in ("A", "B"))
    for arm, scores in (("A", a), ("B", b)):
        want = ref["iqm"][arm]
        assert iqm(scores) == pytest.approx(want["value"], abs=1e-12)  # the same statistic
        got = iqm_interval(scores, np.random.default_rng(0), resamples=20000)
        assert got.value == pytest.approx(want["value"], abs=1e-12)
        assert got.low == pytest.approx(want["low"], abs=0.02)  # another generator's draws
        assert got.high == pytest.approx(want["high"], abs=0.02)
    want = ref["probability_of_improvement"]["A,B"]
    assert probability_of_improvement(a, b) == pytest.approx(want["value"], abs=1e-12)
    got = improvement_interval(a, b, np.random.default_rng(0), resamples=20000)
    assert got.low == pytest.approx(want["low"], abs=0.04)
    assert got.high == pytest.approx(want["high"], abs=0.04)
    again = improvement_interval(a, b, np.random.default_rng(0), resamples=20000)
    assert again == got  # a seeded generator repeats exactly


def fake_run(root: Path, name: str, arm: str | None, seed: int, score: float,
             spec: str = "mpe2:simple_speaker_listener_v4") -> Path:
    """A run directory as a run leaves it, with a final score and a curve of 3 generations."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": "tiny", "seed": seed,
                                                     "env": {"spec": spec}}))
    summary = {"final_score": score, "random_score": -70.0, "best_fitness": score - 1,
               "members": [{}, {}], "generation_marks": [[0.0, 400], [1.0, 800], [2.0, 1200]],
               "fitness_history": [[score - 9, score - 12], [score - 4, score - 6],
                                   [score - 1, score - 3]]}
    (run / "summary.json").write_text(json.dumps(summary))
    if arm is not None:
        (run / STUDY_FILE).write_text(json.dumps({"arm": arm}))
    return run


def test_a_report_reads_runs_by_arm_and_writes_its_tables_json_and_plots(tmp_path, capsys) -> None:
    study = tmp_path / "study"
    for seed, (good, bad) in enumerate([(-20.0, -30.0), (-15.0, -28.0), (-25.0, -26.0)]):
        fake_run(study, f"lr=0.01/seed={seed}", "lr=0.01", seed, good)
        fake_run(study, f"lr=0.001/seed={seed}", "lr=0.001", seed, bad)
    (study / "lr=0.01" / "unfinished").mkdir()  # a run that never wrote its summary: skipped
    runs = find_runs([study])
    assert [(r.arm, r.seed) for r in runs][:3] == [("lr=0.001", 0), ("lr=0.001", 1),
                                                   ("lr=0.001", 2)]
    assert runs[0].curve == [(200, -39.0), (400, -34.0), (600, -31.0)]  # steps per member
    report = Report(runs)
    text = report.markdown()
    assert "| lr=0.001 | 3 | 0, 1, 2 | -28.00 ± 1.15 |" in text
    # no run of lr=0.001 beats one of lr=0.01; paired over the seeds: -10, -13, -1
    assert "| lr=0.001 | lr=0.01 | 0.00 [0.00, 0.00] | -8.00 ± 3.61 (seeds 0, 1, 2) |" in text
    assert main(["report", str(study), "--out", str(tmp_path / "out")]) == 0
    assert "P(X > Y)" in capsys.readouterr().out
    for name in ("report.md", "curves.png", "profile.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    marl_eval = json.loads((tmp_path / "out" / "report.json").read_text())
    run = marl_eval["mpe2"]["simple_speaker_listener_v4"]["lr=0.01"]["run_1"]
    assert run["absolute_metrics"] == {"return": [-15.0]}
    assert run["step_2"] == {"step_count": 600, "return": [-16.0]}


def test_several_envs_aggregate_normalised_by_random_play_and_the_best_run(tmp_path) -> None:
    for seed in range(2):
        fake_run(tmp_path, f"a-spread-{seed}", "a", seed, -20.0 + seed, "mpe2:simple_spread_v3")
        fake_run(tmp_path, f"a-tag-{seed}", "a", seed, 10.0 + seed, "mpe2:simple_tag_v3")
        fake_run(tmp_path, f"b-spread-{seed}", "b", seed, -40.0, "mpe2:simple_spread_v3")
        fake_run(tmp_path, f"b-tag-{seed}", "b", seed, 0.0, "mpe2:simple_tag_v3")
    report = Report(find_runs([tmp_path]))
    assert report.tasks == ["mpe2:simple_spread_v3", "mpe2:simple_tag_v3"]
    a = report.scores("a")  # (runs, tasks): random play (-70) is 0, the best run 1
    np.testing.assert_allclose(a[1], [1.0, 1.0])
    np.testing.assert_allclose(a[0], [(-20 + 70) / (-19 + 70), (10 + 70) / (11 + 70)])
    assert "each task normalised" in report.markdown()
    assert report.improvement("a", "b").value == 1.0


def test_runs_without_a_study_file_are_arms_by_the_folder_they_are_in(tmp_path) -> None:
    for seed in range(2):
        fake_run(tmp_path / "fast", f"run-{seed}", None, seed, -20.0)
        fake_run(tmp_path / "slow", f"run-{seed}", None, seed, -30.0)
    assert Report(find_runs([tmp_path / "fast", tmp_path / "slow"])).arms == ["fast", "slow"]
    assert {r.arm for r in find_runs([tmp_path / "fast" / "run-0"])} == {"tiny"}  # its config


def test_a_report_without_finished_runs_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no finished run found"):
        Report(find_runs([tmp_path / "empty"]))
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "run or sweep folder" in capsys.readouterr().err
