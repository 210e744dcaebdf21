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
group's agents to have the same spaces, :func:`shared_groups`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
        first = members[0]
        for other in members[1:]:
            for kind, sp in (("observation", observation_spaces), ("action", action_spaces)):
                if sp[other] != sp[first]:
                    raise ValueError(
                        f"group {gid!r}: {kind} space of {other!r} ({sp[other]}) differs from "
                        f"that of {first!r} ({sp[first]}), so they cannot share one policy; "
                        "rename the agents so that they are in different groups")
    return groups
