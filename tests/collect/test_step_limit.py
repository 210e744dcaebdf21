"""A game that never ends, through every loop that plays it: fitness and final evaluations
end at the step limit and count the unfinished episodes; league games count as draws and are
reported; training collection truncates (bootstrapping rows) and counts them. The env is
``tests.envs.toy_envs:EndlessEnv``: ``e_0`` scores 1 per step, ``e_1`` 0, so a result read
from the scores would be a win for whoever holds ``e_0``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distmarl.agents import resolve_sides
from distmarl.algorithms import IPPO, MADDPG
from distmarl.collect import Collector, RandomPolicy, evaluate, fixed_scores
from distmarl.collect.evaluation import score_member
from distmarl.config import ExperimentConfig
from distmarl.envs import make_vector_env
from distmarl.factory import env_spaces, make_algorithm
from distmarl.league.plans import Match
from distmarl.league.saved import evaluate_league_member
from distmarl.league.seating import DRAW, Seating, play_games

ENDLESS = "tests.envs.toy_envs:EndlessEnv"
LIMIT = 6
NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [16]},
       "head_config": {"hidden_size": [16]}}


def endless(num_envs: int = 2, limit: int = LIMIT) -> Any:
    return make_vector_env(ENDLESS, num_envs, mode="sync", seed=0, max_episode_steps=limit)


def spaces(venv: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    agents = list(venv.possible_agents)
    return ({a: venv.single_observation_space(a) for a in agents},
            {a: venv.single_action_space(a) for a in agents})


def config(**league: Any) -> ExperimentConfig:
    """A run on the endless game, its limit set in the config (symmetric league: ``league``)."""
    return ExperimentConfig.model_validate({
        "env": {"spec": ENDLESS, "kwargs": {}, "num_envs": 2, "max_episode_steps": LIMIT},
        "algorithm": {"name": "IPPO", "net_config": NET},
        "population": {"size": 2}, "evolution": {"tournament": {"size": 2}},
        **({"league": league} if league else {})})


def test_fitness_and_final_evaluations_end_at_the_limit_and_count_the_unfinished() -> None:
    with endless() as venv:
        policy = RandomPolicy(spaces(venv)[1], 0)
        scores = evaluate(venv, policy, episodes=3, seed=1)
        assert scores == [LIMIT] * 6 and scores.capped == 6  # e_0's reward, partial
        tighter = evaluate(venv, policy, episodes=3, max_steps=4, seed=1)  # eval_steps
        # partial scores, as eval_steps asks: not counted as cut by the env's step limit
        assert tighter == [4.0, 4.0] and tighter.capped == 0
        # eval_steps at the limit: the next episodes have not begun, so are not scored
        assert evaluate(venv, policy, episodes=3, max_steps=LIMIT, seed=1) == [LIMIT] * 2
        final = fixed_scores(venv, policy, episodes=5, seed=1)
        assert final == [LIMIT] * 5 and final.capped == 5
    with make_vector_env("mpe2:simple_speaker_listener_v4", 2, mode="sync", seed=0,
                         max_cycles=5) as mpe:  # episodes the env ends itself are finished
        assert fixed_scores(mpe, RandomPolicy(spaces(mpe)[1], 0), 4, seed=1).capped == 0


def test_a_symmetric_league_game_cut_by_the_limit_is_a_draw_and_is_reported() -> None:
    with endless() as venv:
        obs_spaces, act_spaces = spaces(venv)
        sides = resolve_sides(list(obs_spaces), obs_spaces, act_spaces, None, symmetric=True)
        assert sides is not None
        results = play_games(venv, sides, None, ("member/0", RandomPolicy(act_spaces, 0)),
                             ("ref/random", RandomPolicy(act_spaces, 1)), games=5, seed=3)
    assert [r for *_, r in results] == [DRAW] * 5 and results.capped == 5
    assert {(a, b) for a, b, _ in results} == {("member/0", "ref/random")}


@pytest.mark.parametrize("algo_cls", [MADDPG, IPPO])
def test_training_truncates_at_the_limit_so_rows_bootstrap(algo_cls: type) -> None:
    with endless(limit=4) as venv:
        obs_spaces, act_spaces = spaces(venv)
        algo = algo_cls(obs_spaces, act_spaces, NET, seed=0)
        rollout = Collector(venv, algo, seed=0).collect(10)
    assert rollout.capped == 4 and rollout.episode_lengths == [4, 4, 4, 4]
    assert rollout.episode_scores == [4.0] * 4
    for a in obs_spaces:
        trunc = rollout.data["truncated"][a].reshape(10, 2).astype(bool)
        term = rollout.data["terminated"][a].reshape(10, 2).astype(bool)
        assert trunc[[3, 7]].all() and trunc.sum() == 4 and not term.any()
    if algo_cls is MADDPG:  # the stored next observation is the episode's true last one
        nxt = rollout.data["next_obs"]["e_0"].reshape(10, 2, -1)
        assert (nxt[3, :, 1] == 4).all() and (nxt[4, :, 1] == 1).all()
    else:  # its value estimate is the bootstrap: finite, read from the final observation
        assert np.isfinite(rollout.data["next_value"]["e_0"]).all()


def test_league_training_games_cut_by_the_limit_are_draws() -> None:
    with endless(limit=3) as venv:
        obs_spaces, act_spaces = spaces(venv)
        sides = resolve_sides(list(obs_spaces), obs_spaces, act_spaces, None, symmetric=True)
        assert sides is not None
        plan = [Match({"e_0": "member/0", "e_1": "ref/random"}, "e_0")]  # the scoring seat
        seating = Seating(sides, 2, "member/0", plan, {"ref/random": RandomPolicy(act_spaces, 0)})
        rollout = Collector(venv, IPPO(obs_spaces, act_spaces, NET, seed=0), seed=0,
                            seating=seating).collect(6)
    assert rollout.capped == 4
    assert rollout.match_results == [("member/0", "ref/random", DRAW)] * 4


def test_final_league_games_and_a_saved_members_score_report_the_capped() -> None:
    """``distmarl evaluate``'s paths: a league member's final games (rows count the capped
    games) and a cooperative member's fixed episodes."""
    cfg = config(symmetric=True)
    algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=0)
    out = evaluate_league_member(cfg, algo, member=0, games=4, seed=5)
    assert out["capped"] == 4 and out["score"] == DRAW
    assert [(r["opponent"], r["capped"], r["draw"]) for r in out["opponents"]] == [
        ("ref/random", 4, 1.0)]
    coop = config()
    algo = make_algorithm(coop.algorithm, env_spaces(coop.env), seed=0)
    saved = score_member(coop, algo, 0, "here", episodes=3, seed=5)
    assert saved["capped"] == 3 and saved["mean_score"] == LIMIT
