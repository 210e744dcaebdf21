"""Agent groups: agents named ``<group>_<index>`` form one group (``bob_0``, ``bob_1`` -> ``bob``).

The rule, AgileRL's: an agent's group is its name before a final ``_<digits>`` suffix (ASCII
digits, at least one, and at least one character before the ``_``); a name without such a
suffix is its own group::

    group_of("bob_1") == "bob"            group_of("red_team_12") == "red_team"
    group_of("bob_1_2") == "bob_1"        group_of("bob__0") == "bob_"
    group_of("referee") == "referee"      group_of("bob_x") == "bob_x"
    group_of("_3") == "_3"                group_of("bob_") == "bob_"

Groups configure networks (``net_config`` per group, :mod:`distmarl.networks.net_config`) and
share parameters (IPPO / MAPPO: one policy and one value network per group, which requires the
group's agents to have the same spaces, :func:`shared_groups`), and name the sides of a
competitive game (:func:`resolve_sides`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_GROUP_SUFFIX = re.compile(r"(.+)_[0-9]+")


def group_of(agent: str) -> str:
    """The group of ``agent`` (see the module docstring for the rule)."""
    m = _GROUP_SUFFIX.fullmatch(agent)
    return m.group(1) if m else agent


def agent_groups(agents: Sequence[str]) -> dict[str, list[str]]:
    """Group -> its agents, groups in order of first appearance, agents in the given order."""
    groups: dict[str, list[str]] = {}
    for a in agents:
        groups.setdefault(group_of(a), []).append(a)
    return groups


def shared_groups(agents: Sequence[str], observation_spaces: Mapping[str, Any],
                  action_spaces: Mapping[str, Any]) -> dict[str, list[str]]:
    """:func:`agent_groups` for agents that share one policy per group: every agent of a group
    must have the same observation and action space (gymnasium spaces, compared with ``==``),
    else ValueError naming the group, both agents and both spaces."""
    groups = agent_groups(agents)
    for gid, members in groups.items():
        differ = space_mismatch(members, observation_spaces, action_spaces)
        if differ is not None:
            kind, other, first, sp = differ
            raise ValueError(
                f"group {gid!r}: {kind} space of {other!r} ({sp[other]}) differs from "
                f"that of {first!r} ({sp[first]}), so they cannot share one policy; "
                "rename the agents so that they are in different groups")
    return groups


def space_mismatch(agents: Sequence[str], observation_spaces: Mapping[str, Any],
                   action_spaces: Mapping[str, Any]
                   ) -> tuple[str, str, str, Mapping[str, Any]] | None:
    """The first agent whose space differs from the first agent's, as ``(kind, agent, first
    agent, that kind's spaces)``; None when all of them match."""
    first = agents[0]
    for other in agents[1:]:
        for kind, sp in (("observation", observation_spaces), ("action", action_spaces)):
            if sp[other] != sp[first]:
                return kind, other, first, sp
    return None


@dataclass(frozen=True)
class Sides:
    """The sides of a competitive or mixed game: side name -> its agents, in env order.

    Asymmetric games (``simple_tag``: ``{adversary: [adversary], good: [agent]}``) have one
    population per side. Symmetric games (connect four, tictactoe) have one population playing
    every seat: each agent is a side of its own, named after the agent."""

    agents: dict[str, list[str]]
    symmetric: bool

    def side_of(self, agent: str) -> str:
        """The side ``agent`` plays for."""
        for side, members in self.agents.items():
            if agent in members:
                return side
        raise KeyError(f"agent {agent!r} plays for no side ({sorted(self.agents)})")


def resolve_sides(agents: Sequence[str], observation_spaces: Mapping[str, Any],
                  action_spaces: Mapping[str, Any], sides: Mapping[str, Sequence[str]] | None,
                  symmetric: bool = False, where: str = "league") -> Sides | None:
    """The game's :class:`Sides` from config (``sides``: side name -> agent groups, or
    ``symmetric``), or None for a cooperative game (neither set). ValueError, naming
    ``where``'s field, for: both set; a side with no groups or a group no agent has; a group
    in two sides; agents on no side; fewer than two sides; ``symmetric`` with agents whose
    spaces differ (they cannot swap seats)."""
    if sides and symmetric:
        raise ValueError(f"{where}: set either sides or symmetric: true, not both")
    if symmetric:
        return _symmetric(agents, observation_spaces, action_spaces, where)
    if not sides:
        return None
    groups = agent_groups(agents)
    taken: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    for side, names in sides.items():
        if not names:
            raise ValueError(f"{where}.sides.{side} names no agent group")
        for g in names:
            if g not in groups:
                raise ValueError(f"{where}.sides.{side}: no agent of this env is in group {g!r} "
                                 f"(groups: {list(groups)})")
            if g in taken:
                raise ValueError(f"{where}.sides: group {g!r} is in two sides, {taken[g]!r} "
                                 f"and {side!r}")
            taken[g] = side
        out[side] = [a for a in agents if group_of(a) in names]
    left = [g for g in groups if g not in taken]
    if left:
        raise ValueError(f"{where}.sides: the agents of group(s) {left} play for no side")
    if len(out) < 2:
        raise ValueError(f"{where}.sides: a game needs two sides or more, got {list(out)}")
    return Sides(out, symmetric=False)


def _symmetric(agents: Sequence[str], observation_spaces: Mapping[str, Any],
               action_spaces: Mapping[str, Any], where: str) -> Sides:
    if len(agents) < 2:
        raise ValueError(f"{where}.symmetric: a game needs two seats or more, got {list(agents)}")
    differ = space_mismatch(agents, observation_spaces, action_spaces)
    if differ is not None:
        kind, a, first, sp = differ
        raise ValueError(
            f"{where}.symmetric: true, but the {kind} space of {a!r} ({sp[a]}) differs "
            f"from that of {first!r} ({sp[first]}), so one policy cannot take every "
            f"seat; name the sides instead ({where}.sides)")
    return Sides({a: [a] for a in agents}, symmetric=True)
