"""The league's state without Ray: players per side, training seatings, evaluation opponents,
ratings as fitness, bounded snapshots, copies and resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distmarl.league.plans import OpponentSource
from distmarl.league.state import League, LeagueSettings

SEATS = ("player_0", "player_1")


def symmetric(max_snapshots: int = 4) -> League:
    settings = LeagueSettings(SEATS, symmetric=True, snapshot_every=2,
                              max_snapshots=max_snapshots)
    return League(["player_0"] * 3, {s: ["random"] for s in SEATS}, settings)


def test_a_symmetric_league_seats_members_against_each_other_and_rates_them() -> None:
    league = symmetric()
    assert league.current("player_1") == ["member/0", "member/1", "member/2"]
    matches = league.training_matches(1, np.random.default_rng(0), games=6)
    assert [m.learner_side for m in matches] == list(SEATS) * 3
    assert all(set(m.seats.values()) - {"member/1"} <= {"member/0", "member/2"} for m in matches)
    assert league.evaluation_opponents(0) == {"player_0": ["ref/random", "member/1", "member/2"]}
    league.record_evaluation([("member/0", "ref/random", 1.0)] * 5 + [("member/0", "member/1", 1.0)])
    assert league.fitness(0) > league.fitness(2) > league.fitness(1)
    assert league.ratings.table["ref/random"] == (25.0, 25.0 / 3)  # the anchor never moves
    league.copied(1, 0)
    assert league.fitness(1) == league.fitness(0)


def test_random_play_anchors_the_scale_and_other_references_are_rated() -> None:
    settings = LeagueSettings(SEATS, symmetric=True)
    league = League(["player_0"] * 2, {s: ["minimax", "random"] for s in SEATS}, settings)
    assert league.anchor == "ref/random"
    # member 0 beats random but loses to minimax: minimax rises above it, random stays
    league.record_evaluation([("member/0", "ref/random", 1.0)] * 4
                             + [("member/0", "ref/minimax", 0.0)] * 4)
    assert league.ratings.table["ref/random"] == (25.0, 25.0 / 3)
    assert league.ratings.ordinal("ref/minimax") > league.fitness(0) > 0.0
    # with the references as the only source every training game is against one of them
    both = League(["player_0"] * 2, {s: ["minimax", "random"] for s in SEATS},
                  LeagueSettings(SEATS, symmetric=True,
                                 opponents=(OpponentSource("reference", 1.0),)))
    matches = both.training_matches(0, np.random.default_rng(0), games=40)
    opponents = {p for m in matches for s, p in m.seats.items() if s != m.learner_side}
    assert opponents == {"ref/minimax", "ref/random"}
    # without random play, the first reference by name is the anchor
    alone = League(["player_0"], {s: ["minimax"] for s in SEATS}, settings)
    assert alone.anchor == "ref/minimax" and alone.ratings.fixed == {"ref/minimax"}


def test_settings_refuse_opponent_sources_whose_shares_miss_one() -> None:
    """The league's settings check their sources when made, not at the first game."""
    with pytest.raises(ValueError, match=r"shares sum to 0\.5, not 1"):
        LeagueSettings(SEATS, symmetric=True, opponents=(OpponentSource("current", 0.5),))
    with pytest.raises(ValueError, match="'snapshot' is listed twice"):
        LeagueSettings(SEATS, symmetric=True, opponents=(OpponentSource("snapshot", 0.5),) * 2)


def test_snapshots_join_every_few_generations_rated_as_their_member_and_stay_bounded() -> None:
    league = symmetric(max_snapshots=4)
    league.record_evaluation([("member/0", "ref/random", 1.0)] * 3)
    assert [league.snapshot_due(g) for g in range(5)] == [False, False, True, False, True]
    new, gone = league.snapshot(2)
    assert [s.id for s in new] == ["snapshot/0", "snapshot/1", "snapshot/2"] and gone == []
    assert league.ratings.table["snapshot/0"] == league.ratings.table["member/0"]
    league.record_training([("member/1", "snapshot/0", 0.0)])
    new, gone = league.snapshot(4)
    assert [s.id for s in gone] == ["snapshot/0", "snapshot/1"]
    assert league.snapshots("player_1") == ["snapshot/2", "snapshot/3", "snapshot/4",
                                            "snapshot/5"]
    assert "snapshot/0" not in league.ratings.table
    assert all("snapshot/0" not in pair for pair in league.record.counts)
    # the snapshots now share training games with current members
    picks = [m.seats for m in league.training_matches(0, np.random.default_rng(1), 200)]
    opponents = [p for seats in picks for p in seats.values() if p != "member/0"]
    assert 0.3 < np.mean([p.startswith("snapshot/") for p in opponents]) < 0.7


def test_an_asymmetric_league_keeps_sides_apart_and_resumes_from_its_state() -> None:
    settings = LeagueSettings(("predators", "prey"), symmetric=False, snapshot_every=1)
    league = League(["predators", "predators", "prey", "prey"],
                    {"predators": ["random"], "prey": ["random", "flee"]}, settings)
    assert league.current("prey") == ["member/2", "member/3"]
    assert league.evaluation_opponents(0) == {"prey": ["ref/random", "ref/flee", "member/2",
                                                       "member/3"]}
    assert league.evaluation_opponents(3) == {"predators": ["ref/random", "member/0",
                                                            "member/1"]}
    for m in league.training_matches(2, np.random.default_rng(0), 10):
        assert m.seats["prey"] == "member/2" and m.seats["predators"] in {"member/0", "member/1"}
    league.snapshot(1)
    league.record_evaluation([("member/0", "member/2", 1.0), ("member/3", "snapshot/0", 0.5)])
    again = League(["predators", "predators", "prey", "prey"],
                   {"predators": ["random"], "prey": ["random", "flee"]}, settings)
    again.load_state_dict(league.state_dict())
    assert again.ratings.table == league.ratings.table
    assert again.record.counts == league.record.counts
    assert again.snapshots("prey") == league.snapshots("prey") == ["snapshot/2", "snapshot/3"]
    assert again.fitness(0) == pytest.approx(league.fitness(0))


def test_a_run_s_league_takes_its_opponent_sources_from_the_config() -> None:
    """``league.opponents`` of the tictactoe example reaches the league's settings, source by
    source, and its training games meet the references as well as members."""
    from distmarl.config import load_config
    from distmarl.factory import preflight
    from distmarl.league.setup import league_setup

    example = Path(__file__).resolve().parents[2] / "examples" / "configs" / \
        "tictactoe_ippo_league.yaml"
    cfg = load_config(example, ["league.opponents=[{source: reference, share: 0.5, "
                                "weighting: uniform}, {source: current, share: 0.5}]"])
    setup = league_setup(cfg, preflight(cfg))
    assert setup is not None
    assert setup.league.settings.opponents == (OpponentSource("reference", 0.5, "uniform"),
                                               OpponentSource("current", 0.5))
    matches = setup.league.training_matches(0, np.random.default_rng(0), games=200)
    opponents = [p for m in matches for s, p in m.seats.items() if s != m.learner_side]
    assert {p.split("/")[0] for p in opponents} == {"ref", "member"}
    assert np.mean([p.startswith("ref/") for p in opponents]) == pytest.approx(0.5, abs=0.1)
