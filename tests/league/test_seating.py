"""League seating in the collector, on real connect four: opponents act for their seats, the
learner learns only from its own, ended games give results and the next match is seated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distmarl.agents import resolve_sides
from distmarl.algorithms import IPPO, MADDPG
from distmarl.collect import Collector, RandomPolicy
from distmarl.envs import make_vector_env
from distmarl.league.plans import Match
from distmarl.league.references import LookaheadConnectFour
from distmarl.league.seating import Seating

NET = {"latent_dim": 16,
       "encoder_config": {"channel_size": [8], "kernel_size": [3], "stride_size": [1]},
       "head_config": {"hidden_size": [16]}}
SEATS = ("player_0", "player_1")


class Recorded:
    """A real policy (by default the lookahead reference) that keeps what it answered."""

    def __init__(self, policy: Any = None) -> None:
        self.policy = LookaheadConnectFour(0) if policy is None else policy
        self.calls: list[dict[str, np.ndarray]] = []

    def act(self, obs: dict[str, Any], explore: bool = False) -> dict[str, np.ndarray]:
        out = self.policy.act(obs, explore)
        self.calls.append({a: v.copy() for a, v in out.items()})
        return out


def plan(games: int) -> list[Match]:
    """The learner's seat turns with every game; the lookahead reference holds the other."""
    out = []
    for k in range(games):
        own, other = SEATS[(k + 1) % 2], SEATS[k % 2]
        out.append(Match({own: "member/0", other: "ref/lookahead"}, own))
    return out


def setup(algo_cls: type, num_envs: int = 4, games: int = 64
          ) -> tuple[Any, Any, Seating, Recorded]:
    venv = make_vector_env("pettingzoo.classic:connect_four_v3", num_envs, mode="sync", seed=0)
    agents = list(venv.possible_agents)
    obs_spaces = {a: venv.single_observation_space(a) for a in agents}
    act_spaces = {a: venv.single_action_space(a) for a in agents}
    sides = resolve_sides(agents, obs_spaces, act_spaces, None, symmetric=True)
    algo = algo_cls(obs_spaces, act_spaces, NET, seed=0)
    opponent = Recorded()
    seating = Seating(sides, num_envs, "member/0", plan(games), {"ref/lookahead": opponent})
    return venv, algo, seating, opponent


@pytest.mark.parametrize("algo_cls", [IPPO, MADDPG])
def test_opponents_act_for_their_seats_and_only_the_learners_rows_are_active(algo_cls) -> None:
    venv, algo, seating, opponent = setup(algo_cls)
    try:
        first = [m.learner_side for m in seating.matches]
        rollout = Collector(venv, algo, seed=0, seating=seating).collect(6)
    finally:
        venv.close()
    venv, algo, _, _ = setup(algo_cls)
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
    # the opponent was asked every step, for every seat it holds in some sub-env, and its
    # answers are the actions stored where it holds that seat
    assert len(opponent.calls) == 6
    for t, call in enumerate(opponent.calls):
        assert set(call) == set(SEATS)
        for seat, moves in call.items():
            envs = [e for e, own in enumerate(first) if own != seat]
            np.testing.assert_array_equal(rollout.data["action"][seat].reshape(6, 4)[t, envs],
                                          moves[envs])


def test_an_opponent_sharing_one_network_across_seats_acts_for_unequal_seat_counts() -> None:
    """Three sub-envs: the opponent holds player_0 in two and player_1 in one. A policy that
    shares one network across its group's agents gets the whole batch of each seat (equal
    rows), and its answers are stored only where it holds the seat."""
    venv = make_vector_env("pettingzoo.classic:connect_four_v3", 3, mode="sync", seed=0)
    agents = list(venv.possible_agents)
    obs_spaces = {a: venv.single_observation_space(a) for a in agents}
    act_spaces = {a: venv.single_action_space(a) for a in agents}
    sides = resolve_sides(agents, obs_spaces, act_spaces, None, symmetric=True)
    learner = IPPO(obs_spaces, act_spaces, NET, seed=0)
    opponent = Recorded(IPPO(obs_spaces, act_spaces, NET, seed=1))
    assert opponent.policy.groups == {"player": list(SEATS)}  # one network for both seats
    seats = ["player_1", "player_0", "player_1"]  # the learner's
    matches = [Match({own: "member/0", SEATS[1 - SEATS.index(own)]: "member/1"}, own)
               for own in seats]
    seating = Seating(sides, 3, "member/0", matches, {"member/1": opponent})
    try:
        rollout = Collector(venv, learner, seed=0, seating=seating).collect(4)
    finally:
        venv.close()
    assert len(opponent.calls) == 4
    for t, call in enumerate(opponent.calls):
        for seat, moves in call.items():
            assert moves.shape == (3,)
            envs = [e for e, own in enumerate(seats) if own != seat]
            np.testing.assert_array_equal(rollout.data["action"][seat].reshape(4, 3)[t, envs],
                                          moves[envs])


def test_ended_games_give_results_and_seat_the_next_match_of_the_plan() -> None:
    venv, algo, seating, _ = setup(IPPO, num_envs=2, games=5)
    try:
        collector = Collector(venv, algo, seed=0, seating=seating)
        rollout = collector.collect(200)
        results = rollout.match_results
        assert len(results) == len(rollout.episode_scores) >= 4
        assert seating.next == 2 + len(results)  # every ended game seated the next
        # the two running games are the plan's last two seated (in whichever sub-envs ended)
        assert sorted(id(m) for m in seating.matches) == sorted(
            id(seating.plan[k % 5]) for k in range(seating.next - 2, seating.next))
        # a new plan: running games go on, the next ones meet another opponent
        seating.replan([Match({"player_0": "member/0", "player_1": "ref/random"}, "player_0")],
                       {"ref/random": RandomPolicy({a: venv.single_action_space(a)
                                                    for a in SEATS}, 0)})
        assert set(seating.policies) == {"ref/lookahead", "ref/random"}  # lookahead plays on
        later = collector.collect(200).match_results
        # the next plan: the lookahead player's games are over, so it is let go
        seating.replan([Match({"player_0": "member/0", "player_1": "ref/random"}, "player_0")],
                       {})
    finally:
        venv.close()
    assert set(seating.policies) == {"ref/random"}
    assert {(a, b) for a, b, _ in results} == {("member/0", "ref/lookahead")}
    assert {r for _, _, r in results} <= {0.0, 0.5, 1.0}
    assert np.mean([r for *_, r in results]) < 0.5  # an untrained learner loses to lookahead
    assert later[0][1] == "ref/lookahead" and later[-1][1] == "ref/random"


def test_a_self_play_match_teaches_the_learner_every_seat_and_gives_no_result() -> None:
    """Two sub-envs play the learner against itself, two against the lookahead player: the
    self-play sub-envs' rows are the learner's in both seats (as without a league), the
    opponent is asked only for its own sub-envs, and only its games give results."""
    venv, algo, against_lookahead, opponent = setup(IPPO)
    selfplay = Match({"player_0": "member/0", "player_1": "member/0"}, "player_0")
    plan = [selfplay, Match({"player_0": "member/0", "player_1": "ref/lookahead"}, "player_0")]
    seating = Seating(against_lookahead.sides, 4, "member/0", plan, {"ref/lookahead": opponent})
    try:  # sub-envs 0 and 2 self-play, 1 and 3 meet lookahead (the plan repeats)
        rollout = Collector(venv, algo, seed=0, seating=seating).collect(6)
        results = Collector(venv, algo, seed=0, seating=seating).collect(200).match_results
    finally:
        venv.close()
    venv, algo, _, _ = setup(IPPO)
    try:
        alone = Collector(venv, algo, seed=0).collect(6)
    finally:
        venv.close()
    active = {a: rollout.data["active"][a].reshape(6, 4).astype(bool) for a in SEATS}
    base = {a: alone.data["active"][a].reshape(6, 4).astype(bool) for a in SEATS}
    for a in SEATS:
        np.testing.assert_array_equal(active[a][:, [0, 2]], base[a][:, [0, 2]])
    assert active["player_0"][:, [0, 2]].any() and active["player_1"][:, [0, 2]].any()
    assert not active["player_1"][:, [1, 3]].any()  # lookahead's seat: not the learner's
    for t, call in enumerate(opponent.calls[:6]):  # its moves stored in its sub-envs only
        np.testing.assert_array_equal(rollout.data["action"]["player_1"].reshape(6, 4)[t, [1, 3]],
                                      call["player_1"][[1, 3]])
    assert results and {b for _, b, _ in results} == {"ref/lookahead"}


class Column:
    """A scripted connect four player that always answers one column."""

    def __init__(self, column: int) -> None:
        self.column = column

    def act(self, obs: dict[str, Any], explore: bool = False) -> dict[str, np.ndarray]:
        return {a: np.full(len(o["action_mask"]), self.column) for a, o in obs.items()}


def noisy_actions(epsilon: float, seed: int = 0, num_envs: int = 64
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[str], Any]:
    """One step of ``override`` on fresh boards (``num_envs`` sub-envs, the learner's seat
    turning) against an opponent that always plays column 3: (the learner's actions, the
    actions played, the learner's seat per sub-env, the observations)."""
    venv = make_vector_env("pettingzoo.classic:connect_four_v3", num_envs, mode="sync", seed=0)
    try:
        obs, _ = venv.reset(seed=0)
        acts = {a: venv.single_action_space(a) for a in SEATS}
        sides = resolve_sides(SEATS, {a: venv.single_observation_space(a) for a in SEATS}, acts,
                              None, symmetric=True)
    finally:
        venv.close()
    matches = [Match({own: "member/0", SEATS[1 - SEATS.index(own)]: "ref/column"}, own)
               for own in (SEATS[(k + 1) % 2] for k in range(num_envs))]
    seating = Seating(sides, num_envs, "member/0", matches, {"ref/column": Column(3)},
                      epsilon=epsilon, noise=RandomPolicy(acts, 7), seed=seed)
    mine = {a: np.full(num_envs, 6) for a in SEATS}
    played = seating.override(mine, obs, explore=True)
    return mine, played, [m.learner_side for m in seating.matches], obs


def test_opponent_epsilon_makes_that_share_of_opponent_moves_random_and_legal() -> None:
    for eps, lo, hi in ((0.0, 0.0, 0.0), (0.3, 0.15, 0.35), (1.0, 0.7, 1.0)):
        mine, played, own, obs = noisy_actions(eps, num_envs=256)
        changed = []
        for a in SEATS:
            theirs = np.array([o != a for o in own])
            # the learner's seats keep its own actions, whatever epsilon says
            np.testing.assert_array_equal(played[a][~theirs], mine[a][~theirs])
            moves = played[a][theirs]
            assert np.all((moves >= 0) & (moves < 7))
            legal = obs[a]["action_mask"][theirs].astype(bool)
            to_move = legal.any(axis=1)  # the other seat's mask is empty: not its turn
            assert legal[to_move, moves[to_move]].all()
            changed.append(moves != 3)
        share = float(np.concatenate(changed).mean())
        # a random column is column 3 a seventh of the time: expect eps * 6/7 changed
        assert lo <= share <= hi, (eps, share)
    # the same seed gives the same moves; another seed other moves
    assert all(np.array_equal(noisy_actions(0.5)[1][a], noisy_actions(0.5)[1][a]) for a in SEATS)
    assert any(not np.array_equal(noisy_actions(0.5)[1][a], noisy_actions(0.5, seed=1)[1][a])
               for a in SEATS)


def test_opponent_epsilon_out_of_range_or_without_a_noise_policy_is_refused() -> None:
    venv, _, seating, _ = setup(IPPO, num_envs=1)
    venv.close()
    with pytest.raises(ValueError, match=r"league.opponent_epsilon must be within \[0, 1\]"):
        Seating(seating.sides, 1, "member/0", seating.plan, seating.policies, epsilon=1.5)
    with pytest.raises(ValueError, match="needs a policy for the random moves"):
        Seating(seating.sides, 1, "member/0", seating.plan, seating.policies, epsilon=0.1)


def test_a_match_that_does_not_seat_the_learner_or_names_no_policy_is_refused() -> None:
    venv, _, seating, _ = setup(IPPO, num_envs=1)
    venv.close()
    sides = seating.sides
    with pytest.raises(ValueError, match="does not hold its side 'player_0'"):
        Seating(sides, 1, "member/0",
                [Match({"player_0": "member/1", "player_1": "member/0"}, "player_0")], {})
    with pytest.raises(ValueError, match=r"no policy for opponent\(s\) \['member/1'\]"):
        Seating(sides, 1, "member/0",
                [Match({"player_0": "member/0", "player_1": "member/1"}, "player_0")], {})
    with pytest.raises(ValueError, match="at least one match"):
        seating.replan([], {})


def test_evaluation_games_turn_the_learner_over_the_seats_and_score_sides() -> None:
    from distmarl.league.references import FleeingPrey
    from distmarl.league.seating import play_games

    venv, _, seating, _ = setup(IPPO, num_envs=2)
    try:
        spaces = {a: venv.single_action_space(a) for a in SEATS}
        results = play_games(venv, seating.sides, None, ("ref/lookahead", LookaheadConnectFour(0)),
                             ("ref/random", RandomPolicy(spaces, 1)), games=9, seed=0)
        with pytest.raises(ValueError, match="symmetric game's learner takes every seat"):
            play_games(venv, seating.sides, "player_0", ("a", LookaheadConnectFour(0)),
                       ("b", LookaheadConnectFour(1)), 2, 0)
    finally:
        venv.close()
    assert len(results) == 9 and {(a, b) for a, b, _ in results} == {("ref/lookahead",
                                                                      "ref/random")}
    assert np.mean([r for *_, r in results]) > 0.7
    tag = make_vector_env("mpe2:simple_tag_v3", 2, mode="sync", seed=0, max_cycles=25)
    try:
        agents = list(tag.possible_agents)
        obs_spaces = {a: tag.single_observation_space(a) for a in agents}
        act_spaces = {a: tag.single_action_space(a) for a in agents}
        sides = resolve_sides(agents, obs_spaces, act_spaces,
                              {"predators": ["adversary"], "prey": ["agent"]})
        prey = play_games(tag, sides, "prey", ("ref/flee", FleeingPrey()),
                          ("ref/random", RandomPolicy(act_spaces, 2)), games=4, seed=0)
    finally:
        tag.close()
    assert len(prey) == 4 and {r for *_, r in prey} <= {0.0, 0.5, 1.0}


def test_results_compare_side_scores_or_one_sides_threshold() -> None:
    from distmarl.agents import Sides
    from distmarl.league.seating import check_win_above, side_result

    tag = Sides({"predators": ["adversary_0", "adversary_1"], "prey": ["agent_0"]}, False)
    caught = {"adversary_0": 10.0, "adversary_1": 10.0, "agent_0": -10.5}
    escaped = {"adversary_0": 0.0, "adversary_1": 0.0, "agent_0": -0.5}  # an edge penalty
    assert side_result(tag, "prey", escaped) == 0.0  # scores alone: the prey never wins
    above = {"predators": 0.0}
    assert [side_result(tag, s, r, above) for s in ("predators", "prey")
            for r in (caught, escaped)] == [1.0, 0.0, 0.0, 1.0]
    c4 = Sides({"player_0": ["player_0"], "player_1": ["player_1"]}, True)
    assert side_result(c4, "player_1", {"player_0": -1.0, "player_1": 1.0}) == 1.0
    assert side_result(c4, "player_1", {"player_0": 0.0, "player_1": 0.0}) == 0.5
    with pytest.raises(ValueError, match=r"names one side of the game.*got \{'hunters': 0\}"):
        check_win_above(tag, {"hunters": 0})
