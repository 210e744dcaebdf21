"""The statistics the benchmarks report with (distmarl.studies.stats) on known values, and the lines the scripts
print with them, which must read as they did when each script computed its own."""

from __future__ import annotations

import math

import pytest

from benchmarks.learning import league, learning, population_value
from distmarl.studies.stats import fmt_mean_se, mean_se, paired_difference, pm


def test_mean_and_standard_error() -> None:
    m, se = mean_se([1.0, 2.0, 4.0])
    assert m == pytest.approx(7 / 3)
    # sample variance ((4/3)^2 + (1/3)^2 + (5/3)^2) / 2 = 7/3; se = sqrt(7/3 / 3)
    assert se == pytest.approx(math.sqrt(7 / 9))
    assert mean_se([5.0]) == (5.0, None)
    with pytest.raises(ValueError):
        mean_se([])


def test_formatting_mean_and_standard_error() -> None:
    assert pm(1.25, 0.5) == "1.2 +- 0.5" and pm(1.25, None) == "1.2"
    assert pm(0.952, 0.023, ".1%") == "95.2% +- 2.3%"
    assert fmt_mean_se([]) == "-" and fmt_mean_se([2.0]) == "2.0"
    # the figures the fleets and population-size benchmarks printed before the shared module
    assert fmt_mean_se([-14.9, -14.2, -14.4]) == "-14.5 +- 0.2"
    assert fmt_mean_se([1124.3, 863.1, 945.0]) == "977.5 +- 77.1"
    # ... and the population-value report
    assert fmt_mean_se([-22.7, -21.0, -25.3]) == "-23.0 +- 1.3"


def test_paired_difference_over_the_seeds_both_ran() -> None:
    d = paired_difference({0: -20.0, 1: -22.0, 2: -21.0}, {0: -30.0, 1: -31.0, 3: -5.0})
    assert d is not None
    assert d.seeds == [0, 1] and d.differences == [10.0, 9.0]
    assert d.mean == pytest.approx(9.5) and d.se == pytest.approx(0.5)
    one = paired_difference({4: 1.0}, {4: 3.0})
    assert one is not None and one.differences == [-2.0] and one.se is None
    assert paired_difference({0: 1.0}, {1: 1.0}) is None


def test_the_league_and_learning_lines_read_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert league.percent_mean_se([0.02, 0.03, 0.005]) == "1.8% +- 0.7"
    assert league.percent_mean_se([0.5]) == "50.0% +- nan"
    results = ([{"algo": "A", "seed": s, "final_eval": {"mean": m}}
                for s, m in [(0, -50.0), (1, -48.3), (2, -47.1)]]
               + [{"algo": "B", "seed": s, "final_eval": {"mean": m}}
                  for s, m in [(0, -49.2), (1, -51.7), (2, -40.05)]])
    learning.print_paired(learning.last_minus_first(results, ["A", "B"]))
    assert capsys.readouterr().out == (
        "B minus A, fixed-episode eval, seeds [0, 1, 2]: mean +1.48 (standard error 3.04); "
        "per seed +0.8, -3.4, +7.1\n")


def test_the_population_value_report_reads_as_before() -> None:
    runs = [{"task": "t", "arm": arm, "seed": s, "final_score": v, "best_member_score": v + 1,
             "steps_to_target": None, "seconds_to_target": None, "random_score": -76.0}
            for arm, scores in (("evolving", [-22.7, -21.0, -25.3]),
                                ("independent", [-30.0, -28.0, -33.0]))
            for s, v in enumerate(scores)]
    assert population_value.report(runs) == [
        "| task | arm | seeds | elite final score | best member | env steps to target "
        "| seconds to target | random play |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        "| t | evolving | 0,1,2 | -23.0 +- 1.3 | -22.0 +- 1.3 | never (0/3) | never (0/3) "
        "| -76.0 +- 0.0 |",
        "| t | independent | 0,1,2 | -30.3 +- 1.5 | -29.3 +- 1.5 | never (0/3) | never (0/3) "
        "| -76.0 +- 0.0 |",
        "",
        "- t: evolving elite minus independent best member, seeds [0, 1, 2]: +6.33 (standard "
        "error 0.20); per seed +6.3, +6.0, +6.7: resolved: better",
        "- t: evolving elite minus independent elite, seeds [0, 1, 2]: +7.33 (standard error "
        "0.20); per seed +7.3, +7.0, +7.7: resolved: better"]
