"""Which games look competitive: agent groups that oppose, zero-sum rewards, turn-based pairs."""

from __future__ import annotations

import pytest

from distmarl.envs.competitive import competitive_warning, opposed_sides
from distmarl.envs.probe import probe_spec

WORLD_COMM = ["leadadversary_0", "adversary_0", "adversary_1", "adversary_2", "agent_0", "agent_1"]


@pytest.mark.parametrize(("agents", "sides"), [
    (WORLD_COMM, {"adversary": ["leadadversary", "adversary"], "agent": ["agent"]}),
    (["red_0", "red_1", "blue_0", "blue_1"], {"red": ["red"], "blue": ["blue"]}),
    (["redmelee_0", "redranged_0", "bluemele_0", "blueranged_0"],
     {"red": ["redmelee", "redranged"], "blue": ["bluemele", "blueranged"]}),
    (["predator_0", "prey_0", "prey_1"], {"predator": ["predator"], "prey": ["prey"]}),
    (["alice_0", "bob_0", "eve_0"], {"eve": ["eve"], "alice": ["alice", "bob"]}),
    (["speaker_0", "listener_0"], None),
    (["archer_0", "archer_1", "knight_0", "knight_1"], None),  # knights-archers-zombies: a team
    (["agent_0", "agent_1", "agent_2"], None),  # simple_spread
    (["adversary_0", "adversary_1"], None),  # one side only
])
def test_groups_that_look_like_sides(agents, sides) -> None:
    assert opposed_sides(agents) == sides


def test_rock_paper_scissors_is_zero_sum_without_turns() -> None:
    report = probe_spec("pettingzoo.classic:rps_v2", {}, [], seed=0)
    assert not report.turn_based and report.scored_steps == report.zero_sum_steps > 0
    message = competitive_warning("pettingzoo.classic:rps_v2", report)
    assert message is not None and "summed to exactly 0" in message
    assert "league: {symmetric: true}" in message


def test_pistonball_is_cooperative() -> None:
    pytest.importorskip("pymunk")
    report = probe_spec("pettingzoo.butterfly:pistonball_v6", {}, [], seed=0)
    assert competitive_warning("pettingzoo.butterfly:pistonball_v6", report) is None


def test_magent2_battle_names_its_sides() -> None:
    pytest.importorskip("magent2")
    report = probe_spec("magent2.environments:battle_v4", {"map_size": 12}, [], seed=0)
    message = competitive_warning("magent2.environments:battle_v4", report)
    assert message is not None and "league: {sides: {red: [red], blue: [blue]}}" in message
