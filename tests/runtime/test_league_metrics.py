"""A league run's metrics and win-rate plot, without Ray: ratings under namespaced keys."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from distmarl.config import load_config
from distmarl.factory import env_spaces
from distmarl.league.setup import league_setup
from distmarl.runtime.actors.clients import LocalStore
from distmarl.runtime.hooks.league import LeagueHooks
from distmarl.runtime.logic.run_state import RunState

#: the league's snapshots need only a fleet's store here (no game is played)
STORE_ONLY: Any = SimpleNamespace(store=LocalStore())

C4 = Path(__file__).resolve().parents[2] / "examples" / "configs" / "connect_four_ippo.yaml"


def test_ratings_are_namespaced_metrics_and_the_plot_covers_every_player(tmp_path) -> None:
    cfg = load_config(C4, ["population.size=2", "league={symmetric: true}"])
    setup = league_setup(cfg, env_spaces(cfg.env))
    assert setup is not None and setup.league.side_of_member == ["player_0", "player_0"]
    assert setup.references == {"random": ["player_0", "player_1"]}
    run = LeagueHooks(cfg.league, setup, num_envs=2, seed=0, state=RunState(),
                      fleet=STORE_ONLY)
    run.record_evaluation([[("member/0", "ref/random", 1.0)] * 3, [("member/1", "member/0", 0.0)]])
    m = run.metrics()
    assert set(m) == {"member/0/rating", "member/1/rating", "league/ref/random/rating",
                      "league/snapshots", "league/rated_games"}
    assert m["member/0/rating"] > m["member/1/rating"] and m["league/rated_games"] == 4
    assert m["league/ref/random/rating"] == pytest.approx(0.0)
    path = run.plot_win_rates(tmp_path / "win_rates.png")
    assert path.exists() and path.stat().st_size > 1000
    assert run.best_ratings() == {"player_0": m["member/0/rating"]}
    assert run.reference_ratings() == {"ref/random": m["league/ref/random/rating"]}
    assert run.elites([1.0, 3.0]) == {"player_0": 1} and run.elites([2.0, 2.0]) == {"player_0": 0}


def test_the_league_tables_hold_every_rating_and_the_win_rate_matrix() -> None:
    cfg = load_config(C4, ["population.size=2", "league={symmetric: true}"])
    setup = league_setup(cfg, env_spaces(cfg.env))
    assert setup is not None
    run = LeagueHooks(cfg.league, setup, num_envs=2, seed=0, state=RunState(),
                      fleet=STORE_ONLY)
    run.record_evaluation([[("member/0", "ref/random", 1.0)] * 3, [("member/1", "member/0", 0.0)]])
    tables = run.tables()
    ratings = tables["league/ratings.json"]
    assert ratings["player"] == ["member/0", "member/1", "ref/random"]
    m = run.metrics()
    assert ratings["rating"][:2] == [m["member/0/rating"], m["member/1/rating"]]
    assert len(ratings["mu"]) == len(ratings["sigma"]) == 3
    rates = tables["league/win_rates.json"]
    assert rates["player"] == ["member/0", "member/1", "ref/random"]
    row = {p: i for i, p in enumerate(rates["player"])}
    record = run.league.record  # a row per player, a column per opponent
    for a in rates["player"]:
        for b in rates["player"]:
            assert rates[b][row[a]] == (0.5 if a == b else record.win_rate(a, b))
    assert rates["ref/random"][row["member/0"]] > 0.5 > rates["member/0"][row["member/1"]]


def test_the_progress_text_shows_each_sides_best_rating_in_a_league() -> None:
    from distmarl.runtime.driver.progress import progress_text

    p = {"env_steps": 50, "max_env_steps": 100, "env_steps_per_s": 10.0, "generation": 2,
         "best_fitness": 3.0}
    assert progress_text(p) == "gen 2  best 3.0"
    assert progress_text({**p, "best_rating": {"player_0": 3.0}}) == "gen 2  rating 3.0"
    two = progress_text({**p, "best_rating": {"predators": 3.0, "prey": -1.25}})
    assert two == "gen 2  rating predators 3.0  prey -1.2"


def test_the_rating_plot_draws_the_references(tmp_path) -> None:
    from distmarl.tracking.plots import plot_fitness

    plain = plot_fitness([[1.0, 2.0], [3.0, 4.0]], tmp_path / "plain.png")
    rated = plot_fitness([[1.0, 2.0], [3.0, 4.0]], tmp_path / "rated.png", "Ratings", "rating",
                         {"ref/random": 0.0, "ref/minimax": 12.0})
    assert plain.exists() and rated.exists()
    assert plain.read_bytes() != rated.read_bytes()


@pytest.mark.parametrize(("league", "message"), [
    ("{symmetric: true}", "league.symmetric: true, but the observation space of 'agent_0'"),
    ("{sides: {predators: [adversary], prey: [agent]}, win_above: {hunters: 0}}",
     "league.win_above names one side of the game"),
    ("{sides: {predators: [adversary], prey: [agent]}, references: [minimax]}", "minimax"),
])
def test_a_bad_league_fails_before_ray_starts(tmp_path, league: str, message: str) -> None:
    from distmarl.config import ConfigError
    from distmarl.runtime.driver.trainer import train

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
    cfg = load_config(tiny, ["env={spec: 'mpe2:simple_tag_v3', kwargs: {max_cycles: 25}}",
                             f"league={league}", f"tracking.directory={tmp_path}"])
    with pytest.raises(ConfigError, match=message):
        train(cfg, run_dir=tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run").exists()  # nothing was made: the check came first


def test_final_games_become_namespaced_metrics() -> None:
    from distmarl.runtime.records.recorder import final_game_metrics

    rows = [{"player": "member/1", "side": "predators", "opponent": "ref/flee", "kind": "member",
             "win": 0.25, "draw": 0.0, "loss": 0.75},
            {"player": "ref/random", "side": "predators", "opponent": "ref/flee",
             "kind": "baseline", "win": 0.1, "draw": 0.0, "loss": 0.9},
            {"player": "ref/random", "side": None, "opponent": "ref/minimax",
             "kind": "baseline", "win": 0.0, "draw": 0.05, "loss": 0.95}]
    m = final_game_metrics(rows)
    assert m["final/member/1/vs/ref/flee/win"] == 0.25
    assert m["final/ref/random/predators/vs/ref/flee/loss"] == 0.9
    assert m["final/ref/random/vs/ref/minimax/draw"] == 0.05 and len(m) == 9
