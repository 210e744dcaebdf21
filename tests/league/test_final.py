"""A league's final evaluation as pure code: the games played, their seeds, and the rates."""

from __future__ import annotations

import pytest

from distmarl.league.final import (
    final_games,
    final_rows,
    member_games,
    outcome,
    pooled,
    rows_of,
)
from distmarl.league.state import League, LeagueSettings

SEATS = ("player_0", "player_1")


def test_every_member_meets_every_reference_on_the_same_games_and_random_plays_them_too() -> None:
    league = League(["player_0"] * 2, {s: ["random", "minimax"] for s in SEATS},
                    LeagueSettings(SEATS, symmetric=True))
    games = final_games(league, {"player_0": 1}, seed=100)
    assert [(g.learner, g.side, g.opponent, g.seed, g.kind) for g in games] == [
        ("member/0", None, "ref/minimax", 100, "member"),
        ("member/0", None, "ref/random", 100 + 7919, "member"),
        ("member/1", None, "ref/minimax", 100, "member"),
        ("member/1", None, "ref/random", 100 + 7919, "member"),
        ("ref/random", None, "ref/minimax", 100, "baseline"),
        ("ref/random", None, "ref/random", 100 + 7919, "baseline")]
    assert member_games(league, 1, 100) == games[2:4]


def test_an_asymmetric_league_pits_the_elites_and_plays_each_sides_baseline() -> None:
    league = League(["predators", "predators", "prey", "prey"],
                    {"predators": ["random"], "prey": ["flee", "random"]},
                    LeagueSettings(("predators", "prey"), symmetric=False))
    games = final_games(league, {"predators": 1, "prey": 2}, seed=0)
    seen = [(g.learner, g.side, g.opponent, g.opponent_side, g.kind) for g in games]
    assert seen == [
        ("member/0", "predators", "ref/flee", "prey", "member"),
        ("member/0", "predators", "ref/random", "prey", "member"),
        ("member/1", "predators", "ref/flee", "prey", "member"),
        ("member/1", "predators", "ref/random", "prey", "member"),
        ("member/2", "prey", "ref/random", "predators", "member"),
        ("member/3", "prey", "ref/random", "predators", "member"),
        ("member/1", "predators", "member/2", "prey", "elites"),
        ("ref/random", "predators", "ref/flee", "prey", "baseline"),
        ("ref/random", "predators", "ref/random", "prey", "baseline"),
        ("ref/random", "prey", "ref/random", "predators", "baseline")]


def test_outcomes_are_rates_and_pooled_scores_weigh_rows_by_games() -> None:
    o = outcome([1.0, 1.0, 0.5, 0.0])
    assert o == {"games": 4.0, "win": 0.5, "draw": 0.25, "loss": 0.25, "score": 0.625,
                 "score_stderr": pytest.approx(0.4146 / 2, abs=1e-4)}
    league = League(["player_0"], {s: ["random", "minimax"] for s in SEATS},
                    LeagueSettings(SEATS, symmetric=True))
    games = member_games(league, 0, 0)
    rows = final_rows(games, [[0.0, 0.5], [1.0, 1.0, 1.0, 1.0]])
    assert [r["opponent"] for r in rows] == ["ref/minimax", "ref/random"]
    score, stderr = pooled(rows_of(rows, "member/0"))
    # the six games pooled: 0, 0.5, 1, 1, 1, 1
    assert score == pytest.approx(4.5 / 6)
    assert stderr == pytest.approx(outcome([0.0, 0.5, 1, 1, 1, 1])["score_stderr"])
    with pytest.raises(ValueError, match="2 game sets but 1 results"):
        final_rows(games, [[1.0]])
    with pytest.raises(ValueError, match="no games"):
        outcome([])
