"""A rollout worker and the league's bookkeeping on a game that never ends (no Ray calls are
made): evaluations, final scores, league games and training collection end at
``env.max_episode_steps``, and the games and episodes it cut are counted and reported."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from distmarl.agents import resolve_sides
from distmarl.factory import buffer_kwargs, env_spaces, rollout_spec
from distmarl.league.final import FinalPairing
from distmarl.league.plans import Match
from distmarl.league.seating import DRAW, GameResults, LeaguePlan, SeatingRules
from distmarl.league.setup import league_setup
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.runtime.actors.clients import LocalBuffer, LocalStore
from distmarl.runtime.actors.rollout import RolloutShell
from distmarl.runtime.hooks.league import LeagueHooks
from distmarl.runtime.logic.run_state import RunState
from tests.collect.test_step_limit import LIMIT, config

#: the league's snapshots need only a fleet's store here (no game is played)
STORE_ONLY: Any = SimpleNamespace(store=LocalStore())


def test_a_rollout_worker_reports_capped_episodes_and_games_in_process() -> None:
    """The worker's own methods, as the runtime calls them (no Ray calls are made), on a
    config whose env.max_episode_steps reaches the envs through make_venv."""
    cfg = config(symmetric=True)
    spc = env_spaces(cfg.env)
    sides = resolve_sides(list(spc[0]), spc[0], spc[1], None, symmetric=True)
    assert sides is not None
    buffer = LocalBuffer(BufferShell(buffer_kwargs(cfg, list(spc[0]), rollout_spec(cfg, spc))))
    shell = RolloutShell(0, 0, cfg.env, cfg.algorithm, spc, buffer, seed=0,
                         league=SeatingRules(sides))
    try:
        assert shell.venv.max_episode_steps == LIMIT
        scores = shell.evaluate(-1, None, episodes=2, max_steps=None, seed=0)
        assert scores.capped == 4 and scores == [LIMIT] * 4
        final = shell.score_fixed(-1, None, episodes=3, seed=0)
        assert final.capped == 3
        games = shell.play(-1, None, ("ref/random", None, None, "e_1"), games=4, seed=0,
                           side=None)
        assert games.capped == 4 and {r for *_, r in games} == {DRAW}
        collected = shell.collect(LIMIT, -1, None, LeaguePlan(
            [Match({"e_0": "member/0", "e_1": "ref/random"}, "e_0")],
            {"ref/random": (None, None, "e_1")}))
        assert collected.capped_episodes == 2
        assert {r for *_, r in collected.match_results} == {DRAW}
    finally:
        shell.close()


def test_the_league_counts_capped_games_in_its_summary_metrics_and_final_rows() -> None:
    cfg = config(symmetric=True)
    setup = league_setup(cfg, env_spaces(cfg.env))
    assert setup is not None
    league = LeagueHooks(cfg.league, setup, 2, 0, RunState(), STORE_ONLY)
    games = GameResults([("member/0", "ref/random", DRAW)] * 3, capped=3)
    won = GameResults([("member/1", "ref/random", 1.0)])
    assert league.record_evaluation([games, won]) == 3
    league.record_training([("member/0", "member/1", DRAW)], capped=1)
    assert league.summary()["league"]["capped_games"] == {"training": 1, "evaluation": 3}
    metrics = league.metrics()
    assert metrics["league/capped_evaluation_games"] == 3.0
    assert metrics["league/capped_training_games"] == 1.0
    plan = [FinalPairing("member/0", None, "ref/random", "e_0", 1, "member"),
            FinalPairing("member/1", None, "ref/random", "e_0", 1, "member")]
    rows = league.final_rows(plan, [games, won])
    assert [(r["capped"], r["draw"]) for r in rows] == [(3, 1.0), (0, 0.0)]
    again = LeagueHooks(cfg.league, setup, 2, 0, RunState(), STORE_ONLY)
    again.load_state_dict(league.state_dict(), {})
    assert again.capped == league.capped  # a resumed run goes on counting
