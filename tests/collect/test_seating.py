"""League seating in the collector, on real connect four: opponents act for their seats, the
learner learns only from its own, ended games give results and the next match is seated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distmarl.agents import resolve_sides
from distmarl.algorithms import IPPO, MADDPG
from distmarl.collect import Collector
from distmarl.collect.references import LookaheadConnectFour
from distmarl.collect.seating import Seating
from distmarl.envs import make_vector_env
from distmarl.hpo.league import Match

NET = {"latent_dim": 16,
       "encoder_config": {"channel_size": [8], "kernel_size": [3], "stride_size": [1]},
       "head_config": {"hidden_size": [16]}}
SEATS = ("player_0", "player_1")


class Recorded:
    """A real reference that keeps what it was asked and what it answered."""

    def __init__(self) -> None:
        self.policy, self.calls = LookaheadConnectFour(0), []

    def act(self, obs: dict[str, Any], explore: bool = False) -> dict[str, np.ndarray]:
        out = self.policy.act(obs, explore)
        self.calls.append({a: v.copy() for a, v in out.items()})
        return out


def setup(algo_cls: type, num_envs: int = 4) -> tuple[Any, Any, Seating, Recorded, list[int]]:
    venv = make_vector_env("pettingzoo.classic:connect_four_v3", num_envs, mode="sync", seed=0)
    agents = list(venv.possible_agents)
    obs_spaces = {a: venv.single_observation_space(a) for a in agents}
    act_spaces = {a: venv.single_action_space(a) for a in agents}
    sides = resolve_sides(agents, obs_spaces, act_spaces, None, symmetric=True)
    algo = algo_cls(obs_spaces, act_spaces, NET, seed=0)
    opponent, seated = Recorded(), []

    def next_match(env: int) -> Match:  # the learner's seat turns with every game of a sub-env
        seated.append(env)
        own = SEATS[(env + seated.count(env)) % 2]
        other = SEATS[1 - SEATS.index(own)]
        return Match({own: "member/0", other: "ref/lookahead"}, own)

    seating = Seating(sides, num_envs, "member/0", next_match, {"ref/lookahead": opponent})
    return venv, algo, seating, opponent, seated


@pytest.mark.parametrize("algo_cls", [IPPO, MADDPG])
def test_opponents_act_for_their_seats_and_only_the_learners_rows_are_active(algo_cls) -> None:
    venv, algo, seating, opponent, _ = setup(algo_cls)
    try:
        first = [m.learner_side for m in seating.matches]
        rollout = Collector(venv, algo, seed=0, seating=seating).collect(6)
    finally:
        venv.close()
    venv, algo, _, _, _ = setup(algo_cls)
    try:  # the same steps without a league: every seat the learner's
        alone = Collector(venv, algo, seed=0).collect(6)
    finally:
        venv.close()
    assert first == ["player_1", "player_0", "player_1", "player_0"]
    active = {a: rollout.data["active"][a].reshape(6, 4).astype(bool) for a in SEATS}
    base = {a: alone.data["active"][a].reshape(6, 4).astype(bool) for a in SEATS}
    for e, own in enumerate(first):  # no game ends within 6 steps: first[e] all along
        other = SEATS[1 - SEATS.index(own)]
        assert not active[other][:, e].any()
        np.testing.assert_array_equal(active[own][:, e], base[own][:, e])
        assert active[own][:, e].any()
    # the opponent was asked every step, for the seat it holds in each sub-env, and its
    # answers are the actions stored for that seat
    assert len(opponent.calls) == 6
    for t, call in enumerate(opponent.calls):
        for seat, moves in call.items():
            envs = [e for e, own in enumerate(first) if own != seat]
            np.testing.assert_array_equal(rollout.data["action"][seat].reshape(6, 4)[t, envs],
                                          moves)


def test_ended_games_give_results_and_the_next_match() -> None:
    venv, algo, seating, _, seated = setup(IPPO, num_envs=2)
    try:
        rollout = Collector(venv, algo, seed=0, seating=seating).collect(200)
    finally:
        venv.close()
    results = rollout.match_results
    assert len(results) == len(rollout.episode_scores) >= 4
    assert {(a, b) for a, b, _ in results} == {("member/0", "ref/lookahead")}
    assert {r for _, _, r in results} <= {0.0, 0.5, 1.0}
    assert np.mean([r for *_, r in results]) < 0.5  # an untrained learner loses to lookahead
    assert len(seated) == 2 + len(results)  # every ended game seated the next


def test_a_match_that_does_not_seat_the_learner_or_names_no_policy_is_refused() -> None:
    venv, _, seating, _, _ = setup(IPPO, num_envs=1)
    venv.close()
    sides = seating.sides
    with pytest.raises(ValueError, match="does not hold its side 'player_0'"):
        Seating(sides, 1, "member/0",
                lambda e: Match({"player_0": "member/1", "player_1": "member/0"}, "player_0"), {})
    with pytest.raises(ValueError, match=r"no policy for opponent\(s\) \['member/1'\]"):
        Seating(sides, 1, "member/0",
                lambda e: Match({"player_0": "member/0", "player_1": "member/1"}, "player_0"), {})
