"""Every episode ends: the vector env truncates an episode still running at its step limit
and reports it capped; the limit is the config's, or the env's own, or one fitted to a
turn-based game's board, or the stated default (which the run warns of)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distmarl.envs import make_env, make_vector_env
from distmarl.envs.limits import (
    DEFAULT_MAX_EPISODE_STEPS,
    MOVES_PER_CELL,
    StepLimit,
    board_limit,
    declared_limit,
    default_limit_note,
    resolve_limit,
)
from tests.envs.toy_envs import DyingEnv, EndlessEnv, EndlessTurns

ENDLESS = "tests.envs.toy_envs:EndlessEnv"
TURNS = "tests.envs.toy_envs:EndlessTurns"


def zeros(venv: Any) -> dict[str, np.ndarray]:
    return {a: np.zeros(venv.num_envs, dtype=np.int64) for a in venv.possible_agents}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("spec", [ENDLESS, TURNS])
def test_an_endless_game_is_truncated_at_the_limit_and_reported_capped(spec: str,
                                                                       mode: str) -> None:
    with make_vector_env(spec, 2, mode=mode, seed=0, max_episode_steps=4) as venv:
        assert venv.max_episode_steps == 4
        obs, infos = venv.reset(seed=0)
        assert not infos["capped"].any()
        ends = []
        for t in range(1, 13):
            obs, _, term, trunc, infos = venv.step(zeros(venv))
            if infos["_final_obs"].any():
                ends.append(t)
                assert infos["capped"].all()
                for a in venv.possible_agents:  # truncated, not terminated: it bootstraps
                    assert trunc[a].all() and not term[a].any()
                    assert (infos["final_obs"][a][:, 1] == 4).all()  # the true last obs
                    assert (obs[a][:, 1] == 0).all()  # the next episode started
                assert "distmarl_step_limit" not in infos["final_info"]
            else:
                assert not infos["capped"].any()
    assert ends == [4, 8, 12]


def test_an_episode_the_env_ends_at_the_limit_itself_is_not_capped() -> None:
    with make_vector_env("tests.envs.toy_envs:DyingEnv", 2, mode="sync", seed=0,
                         deaths=(50, 50), max_steps=5, max_episode_steps=5) as venv:
        venv.reset(seed=0)
        for _ in range(5):
            _, _, _, trunc, infos = venv.step(zeros(venv))
        assert infos["_final_obs"].all() and not infos["capped"].any()
        assert trunc["d_0"].all()  # the env's own truncation


def test_auto_takes_the_envs_own_limit_else_the_stated_default() -> None:
    assert declared_limit(EndlessEnv()) is None and declared_limit(EndlessTurns()) is None
    assert resolve_limit("auto", EndlessEnv()) == DEFAULT_MAX_EPISODE_STEPS == 10_000
    assert resolve_limit("auto", EndlessEnv(declared=6)) == 6  # gymnasium-style spec
    assert resolve_limit("auto", DyingEnv(max_steps=9)) == 9  # a max_steps attribute
    assert resolve_limit(3, DyingEnv(max_steps=9)) == 3  # the config's wins
    with make_vector_env("mpe2:simple_tag_v3", 1, mode="sync", seed=0, max_cycles=7) as venv:
        assert venv.max_episode_steps == 7  # mpe's max_cycles, inside its raw env
        venv.reset(seed=0)
        for _ in range(7):
            actions = {a: np.zeros(1, dtype=np.int64) for a in venv.possible_agents}
            _, _, _, _, infos = venv.step(actions)
        assert infos["_final_obs"].all() and not infos["capped"].any()  # mpe ended it
    # a turn-based game states its cycles; each cycle is a move of each player
    with make_vector_env(TURNS, 1, mode="sync", seed=0, max_cycles=3) as venv:
        assert venv.max_episode_steps == 6
    with make_vector_env(ENDLESS, 1, mode="sync", seed=0, declared=5) as venv:
        venv.reset(seed=0)
        capped = [venv.step(zeros(venv))[4]["capped"][0] for _ in range(10)]
        assert np.flatnonzero(capped).tolist() == [4, 9]


def test_each_sub_env_resolves_its_own_limit() -> None:
    from distmarl.envs.vector import VectorParallelEnv

    fns = [lambda: EndlessEnv(declared=3), lambda: EndlessEnv(declared=5)]
    with VectorParallelEnv(fns, mode="sync", seed=0) as venv:
        venv.reset(seed=0)
        ends = [venv.step(zeros(venv))[4]["capped"].copy() for _ in range(5)]
    assert [np.flatnonzero(c).tolist() for c in ends] == [[], [], [0], [], [1]]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "never", True])
def test_a_bad_limit_is_refused_naming_the_setting(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"env\.max_episode_steps must be an int >= 1 or 'auto'"):
        StepLimit(EndlessEnv(), bad)


@pytest.mark.parametrize("spec,kwargs,cells,actions", [
    ("pettingzoo.classic:go_v5", {"board_size": 5}, 25, 26),
    ("pettingzoo.classic:go_v5", {"board_size": 9}, 81, 82),
    ("pettingzoo.classic:connect_four_v3", {}, 42, 7),
    ("pettingzoo.classic:tictactoe_v3", {}, 9, 9),
], ids=["go 5x5", "go 9x9", "connect four", "tictactoe"])
def test_a_board_game_without_a_limit_gets_one_that_fits_its_board(
        spec: str, kwargs: dict[str, Any], cells: int, actions: int) -> None:
    env = make_env(spec, **kwargs)
    try:
        assert declared_limit(env) is None  # no move limit of its own
        fitted = MOVES_PER_CELL * max(cells, actions)
        assert board_limit(env) == resolve_limit("auto", env) == fitted
        assert default_limit_note("auto", env) is None
        assert resolve_limit(50, env) == 50  # the config's wins
    finally:
        env.close()
    assert board_limit(make_env("pettingzoo.classic:go_v5", board_size=5)) == 208


def test_the_default_limit_is_said_where_nothing_fits_one() -> None:
    """A turn-based game without a board, a parallel env without a limit: the default, and a
    note naming the setting; none where the env or the config gives the limit."""
    for env in (make_env(TURNS), EndlessEnv()):
        assert board_limit(env) is None
        assert resolve_limit("auto", env) == DEFAULT_MAX_EPISODE_STEPS
        note = default_limit_note("auto", env)
        assert note is not None and "10,000 env steps" in note
        assert "env.max_episode_steps" in note
        assert default_limit_note(100, env) is None
    assert default_limit_note("auto", EndlessEnv(declared=6)) is None
