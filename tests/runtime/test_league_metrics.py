"""A league run's metrics and win-rate plot, without Ray: ratings under namespaced keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.collect.league_setup import league_setup
from distmarl.config import load_config
from distmarl.factory import env_spaces
from distmarl.runtime.league import LeagueRun
from distmarl.runtime.run_state import RunState

C4 = Path(__file__).resolve().parents[2] / "examples" / "configs" / "connect_four_ippo.yaml"


def test_ratings_are_namespaced_metrics_and_the_plot_covers_every_player(tmp_path) -> None:
    cfg = load_config(C4, ["population.size=2", "league={symmetric: true}"])
    setup = league_setup(cfg, env_spaces(cfg.env))
    assert setup is not None and setup.league.side_of_member == ["player_0", "player_0"]
    assert setup.references == {"random": ["player_0", "player_1"]}
    run = LeagueRun(cfg.league, setup, num_envs=2, seed=0, state=RunState())
    run.record_evaluation([[("member/0", "ref/random", 1.0)] * 3, [("member/1", "member/0", 0.0)]])
    m = run.metrics()
    assert set(m) == {"member/0/rating", "member/1/rating", "league/ref/random/rating",
                      "league/snapshots", "league/rated_games"}
    assert m["member/0/rating"] > m["member/1/rating"] and m["league/rated_games"] == 4
    assert m["league/ref/random/rating"] == pytest.approx(0.0)
    path = run.plot_win_rates(tmp_path / "win_rates.png")
    assert path.exists() and path.stat().st_size > 1000
