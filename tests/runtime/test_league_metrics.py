"""A league run's metrics and win-rate plot, without Ray: ratings under namespaced keys."""

from __future__ import annotations

import pytest

from distmarl.agents import Sides
from distmarl.config import LeagueConfig
from distmarl.runtime.league import LeagueRun, side_of_members
from distmarl.runtime.run_state import RunState


def test_ratings_are_namespaced_metrics_and_the_plot_covers_every_player(tmp_path) -> None:
    sides = Sides({"player_0": ["player_0"], "player_1": ["player_1"]}, symmetric=True)
    assert side_of_members(sides, 2) == ["player_0", "player_0"]
    run = LeagueRun(LeagueConfig(symmetric=True), sides,
                    {"random": ["player_0", "player_1"]}, 2, num_envs=2, seed=0,
                    state=RunState())
    run.record_evaluation([[("member/0", "ref/random", 1.0)] * 3, [("member/1", "member/0", 0.0)]])
    m = run.metrics()
    assert set(m) == {"member/0/rating", "member/1/rating", "league/ref/random/rating",
                      "league/snapshots", "league/rated_games"}
    assert m["member/0/rating"] > m["member/1/rating"] and m["league/rated_games"] == 4
    assert m["league/ref/random/rating"] == pytest.approx(0.0)
    path = run.plot_win_rates(tmp_path / "win_rates.png")
    assert path.exists() and path.stat().st_size > 1000
