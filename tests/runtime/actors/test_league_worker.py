"""A rollout worker in a league, as a plain object writing to an in-process buffer (no Ray
calls are made): a collect call's plan seats its sub-envs against members' weights and
references, evaluation games give results."""

from __future__ import annotations

import numpy as np

from distmarl.agents import resolve_sides
from distmarl.collect import RandomPolicy
from distmarl.config import load_config
from distmarl.factory import buffer_kwargs, env_spaces, make_algorithm, rollout_spec
from distmarl.league.plans import Match
from distmarl.league.seating import LeaguePlan, SeatingRules
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.runtime.actors.clients import LocalBuffer
from distmarl.runtime.actors.rollout import RolloutShell

C4 = "examples/configs/connect_four_ippo.yaml"


def worker(opponent_epsilon: float = 0.0) -> tuple[RolloutShell, BufferShell, object]:
    """Member 0's worker on 2 sub-envs writing to its own buffer, and a rival algorithm."""
    cfg = load_config(C4, ["env.num_envs=2"])
    spaces = env_spaces(cfg.env)
    agents = list(spaces[0])
    sides = resolve_sides(agents, spaces[0], spaces[1], None, symmetric=True)
    buffer = BufferShell(buffer_kwargs(cfg, agents, rollout_spec(cfg, spaces)))
    shell = RolloutShell(0, 0, cfg.env, cfg.algorithm, spaces, LocalBuffer(buffer), seed=0,
                         league=SeatingRules(sides, None, opponent_epsilon))
    return shell, buffer, make_algorithm(cfg.algorithm, spaces, seed=9)


def active_rows(buffer: BufferShell, steps: int) -> dict[str, np.ndarray]:
    """Each seat's ``active`` flags of the last ``steps`` steps the buffer stored, as
    ``(steps, sub-env)``."""
    columns = buffer.state_dict()["columns"]
    return {a: columns[f"{a}/active"][-2 * steps:].reshape(steps, 2).astype(bool)
            for a in ("player_0", "player_1")}


def test_a_plan_seats_members_and_references_and_collection_keeps_the_learners_rows() -> None:
    shell, buffer, rival = worker()
    try:
        plan = LeaguePlan(
            [Match({"player_0": "member/0", "player_1": "member/1"}, "player_0"),
             Match({"player_1": "member/0", "player_0": "ref/random"}, "player_1")],
            {"member/1": (3, [rival.get_weights()], "player_1"),
             "ref/random": (None, None, "player_0")})
        assert shell.collect(4, -1, None, plan).env_steps == 8
        assert shell.league.opponents is not None and shell.league.opponents.version("member/1") == 3
        assert shell.league.seating is not None
        assert [m.seats for m in shell.league.seating.matches] == [m.seats for m in plan.matches]
        active = active_rows(buffer, 4)
        assert not active["player_1"][:, 0].any() and not active["player_0"][:, 1].any()
        # a second plan with the same version fetches nothing (no box needed)
        shell.collect(4, -1, None, LeaguePlan(plan.matches[:1],
                                              {"member/1": (3, None, "player_1")}))
    finally:
        shell.close()


def test_a_self_play_plan_needs_no_opponent_and_keeps_every_seats_rows() -> None:
    shell, buffer, _ = worker()
    try:
        shell.collect(4, -1, None, LeaguePlan(
            [Match({"player_0": "member/0", "player_1": "member/0"}, "player_0"),
             Match({"player_1": "member/0", "player_0": "ref/random"}, "player_1")],
            {"ref/random": (None, None, "player_0")}))
        assert shell.league.seating is not None and set(shell.league.seating.policies) == {"ref/random"}
        active = active_rows(buffer, 4)
        # sub-env 0 plays itself: both seats' moves are the learner's (one seat per turn)
        assert active["player_0"][:, 0].any() and active["player_1"][:, 0].any()
        assert not active["player_0"][:, 1].any()
    finally:
        shell.close()


def test_the_games_opponent_epsilon_reaches_the_seating_with_random_play_for_noise() -> None:
    for eps in (0.0, 0.25):
        shell, _, _ = worker(eps)
        try:
            # training games with random opponent moves run
            shell.collect(8, -1, None, LeaguePlan(
                [Match({"player_0": "member/0", "player_1": "ref/lookahead"}, "player_0")],
                {"ref/lookahead": (None, None, "player_1")}))
            assert shell.league.seating is not None and shell.league.seating.epsilon == eps
            assert isinstance(shell.league.seating.noise, RandomPolicy) == (eps > 0)
        finally:
            shell.close()


def test_evaluation_games_against_a_reference_give_the_members_results() -> None:
    shell, _, _ = worker()
    try:
        results = shell.play(-1, None, ("ref/lookahead", None, None, "player_1"), games=6,
                             seed=0, side=None)
    finally:
        shell.close()
    assert len(results) == 6 and {(a, b) for a, b, _ in results} == {("member/0",
                                                                      "ref/lookahead")}
    assert np.mean([r for *_, r in results]) < 0.5  # an untrained member loses to lookahead
