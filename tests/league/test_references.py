"""Reference opponents on the real PettingZoo games: perfect tictactoe never loses, the
connect-four lookahead wins and blocks, the fleeing prey runs away."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.collect import RandomPolicy, Seats, episode_returns
from distmarl.envs import make_vector_env
from distmarl.league.references import (
    FleeingPrey,
    LookaheadConnectFour,
    MinimaxTicTacToe,
    tictactoe_values,
)


def results(spec: str, first: object, second: object, games: int, seed: int) -> list[float]:
    """The first policy's returns over ``games`` games, seats alternating."""
    venv = make_vector_env(spec, 4, mode="sync", seed=seed)
    seats = list(venv.possible_agents)
    out: list[float] = []
    try:
        for k in range(2):
            mine, theirs = seats[k], seats[1 - k]
            per_env = -(-games // 2 // venv.num_envs)
            returns = episode_returns(venv, Seats({mine: first, theirs: second}), per_env,
                                      seed=seed + k)[: games // 2]
            out += [r[mine] for r in returns]
    finally:
        venv.close()
    return out


def random_play(spec: str, seed: int) -> RandomPolicy:
    venv = make_vector_env(spec, 1, mode="sync", seed=0)
    spaces = {a: venv.single_action_space(a) for a in venv.possible_agents}
    venv.close()
    return RandomPolicy(spaces, seed)


def test_tictactoe_values_know_forced_wins_and_draws() -> None:
    assert set(tictactoe_values((0,) * 9).values()) == {0.0}  # perfect play draws
    # own marks on 0 and 1: playing 2 wins at once; the opponent (on 3, 4) threatens 5
    values = tictactoe_values((1, 1, 0, -1, -1, 0, 0, 0, 0))
    assert values[2] == pytest.approx(0.9) and max(values, key=values.get) == 2
    assert values[5] == 0  # blocking instead of winning: a draw with perfect play
    assert values[6] == pytest.approx(-0.81)  # neither: the opponent wins on 5


def test_minimax_never_loses_at_tictactoe_and_draws_itself() -> None:
    spec = "pettingzoo.classic:tictactoe_v3"
    against_random = results(spec, MinimaxTicTacToe(0), random_play(spec, 1), 40, seed=0)
    assert min(against_random) >= 0 and np.mean([r > 0 for r in against_random]) > 0.7
    assert set(results(spec, MinimaxTicTacToe(1), MinimaxTicTacToe(2), 8, seed=3)) == {0}


def test_lookahead_wins_when_it_can_and_blocks_when_it_must() -> None:
    board = np.zeros((6, 7, 2), np.int8)
    board[5, 0:3, 0] = 1  # three of mine on the bottom row: column 3 wins
    board[5, 4:6, 1] = 1
    board[4, 4, 1] = board[3, 4, 1] = board[2, 4, 1] = 1  # and theirs threatens column 4
    mask = np.ones(7, np.int8)
    ref = LookaheadConnectFour(0)
    obs = {"player_0": {"observation": board[None], "action_mask": mask[None]}}
    assert ref.act(obs)["player_0"].tolist() == [3]
    board[5, 0, 0] = 0  # no win left: block column 4
    assert ref.act(obs)["player_0"].tolist() == [4]
    board[5, 6, 0] = 1  # (full columns are never chosen)
    mask[4] = 0
    assert ref.act(obs)["player_0"][0] != 4


def test_lookahead_beats_random_connect_four_play() -> None:
    spec = "pettingzoo.classic:connect_four_v3"
    returns = results(spec, LookaheadConnectFour(0), random_play(spec, 1), 24, seed=0)
    assert np.mean([r > 0 for r in returns]) > 0.8


def test_the_prey_flees_the_nearest_predator_and_turns_back_at_the_edge() -> None:
    prey = FleeingPrey(num_adversaries=2, num_obstacles=1)
    o = np.zeros((2, 4 + 2 + 4), np.float64)
    o[:, 6:8] = [0.5, 0.0]    # predator 0 to the right
    o[:, 8:10] = [0.0, -0.2]  # predator 1 below, nearer
    o[1, 2:4] = [0.0, 0.95]   # the second prey is at the top edge
    np.testing.assert_allclose(prey.direction(o), [[0.0, 1.0], [0.0, -1.0]])
    assert prey.act({"agent_0": o})["agent_0"].tolist() == [4, 3]  # up; down at the edge
    with pytest.raises(ValueError, match="holds no 3 predators"):
        FleeingPrey(3, 1).act({"agent_0": o})


def test_the_fleeing_prey_is_caught_less_often_than_random_prey() -> None:
    """Random predators on simple_tag: the prey's return is minus 10 per touch (plus an edge
    penalty), so fleeing scores higher."""
    spec = "mpe2:simple_tag_v3"
    venv = make_vector_env(spec, 4, mode="sync", seed=0, max_cycles=50)
    try:
        spaces = {a: venv.single_action_space(a) for a in venv.possible_agents}
        predators = {a: RandomPolicy(spaces, 3) for a in venv.possible_agents if a != "agent_0"}
        prey_returns = {}
        for name, prey in (("flee", FleeingPrey()), ("random", RandomPolicy(spaces, 4))):
            returns = episode_returns(venv, Seats({**predators, "agent_0": prey}), 5, seed=11)
            prey_returns[name] = np.mean([r["agent_0"] for r in returns])
    finally:
        venv.close()
    assert prey_returns["flee"] > prey_returns["random"]


def test_references_are_made_by_name_for_the_games_they_play() -> None:
    from distmarl.league.references import make_reference

    def spaces(spec: str, **kw):
        venv = make_vector_env(spec, 1, mode="sync", seed=0, **kw)
        agents = list(venv.possible_agents)
        out = (agents, {a: venv.single_observation_space(a) for a in agents},
               {a: venv.single_action_space(a) for a in agents})
        venv.close()
        return out

    ttt = spaces("pettingzoo.classic:tictactoe_v3")
    assert isinstance(make_reference("minimax", ["player_1"], *ttt[1:], {}, 0), MinimaxTicTacToe)
    rand = make_reference("random", ["player_1"], *ttt[1:], {}, 0)
    mask = np.zeros((2, 9), np.int8)
    mask[:, 4] = 1
    board = {"observation": np.zeros((2, 3, 3, 2), np.int8), "action_mask": mask}
    assert rand.act({"player_2": board})["player_2"].tolist() == [4, 4]  # any seat, legally
    with pytest.raises(ValueError, match=r"'lookahead' plays one-step lookahead connect four.*"
                                         r"needs a \(6, 7, 2\) board.*'player_1' observes"):
        make_reference("lookahead", ["player_1"], *ttt[1:], {}, 0)
    tag = spaces("mpe2:simple_tag_v3", num_obstacles=1)
    prey = make_reference("flee", ["agent_0"], *tag[1:], {"num_obstacles": 1}, 0)
    assert isinstance(prey, FleeingPrey) and prey.num_obstacles == 1
    with pytest.raises(ValueError, match="needs an observation of 14 values"):
        make_reference("flee", ["agent_0"], *tag[1:], {}, 0)  # the env has 1 obstacle, not 2
    with pytest.raises(ValueError, match=r"unknown reference 'minmax'; known: \['flee'"):
        make_reference("minmax", ["player_1"], *ttt[1:], {}, 0)


def test_each_reference_plays_the_sides_it_can_and_one_that_plays_none_is_refused() -> None:
    from distmarl.agents import resolve_sides
    from distmarl.league.references import reference_sides

    venv = make_vector_env("mpe2:simple_tag_v3", 1, mode="sync", seed=0)
    agents = list(venv.possible_agents)
    spaces = ({a: venv.single_observation_space(a) for a in agents},
              {a: venv.single_action_space(a) for a in agents})
    venv.close()
    sides = resolve_sides(agents, *spaces, {"predators": ["adversary"], "prey": ["agent"]})
    assert reference_sides(["random", "flee"], sides, *spaces, {}) == {
        "random": ["predators", "prey"], "flee": ["prey"]}
    with pytest.raises(ValueError, match=r"'minimax' plays no side of this game \(side "
                                         r"'predators': reference 'minimax' plays perfect"):
        reference_sides(["minimax"], sides, *spaces, {})
    with pytest.raises(ValueError, match=r"unknown reference 'best'"):
        reference_sides(["best"], sides, *spaces, {})
