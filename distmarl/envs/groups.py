"""Agent groups for parameter sharing: ``<group_id>_<agent_idx>`` agents share one policy.

``group_of("adversary_2") == "adversary"``; an id without a numeric ``_<idx>`` suffix is its own
group. ``agent_groups(env)`` lists the groups of an env (a PettingZoo parallel env or a
``VectorParallelEnv``) with the observation and action space their agents share.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gymnasium import spaces


class AgentGroup(NamedTuple):
    """Agents sharing one policy, and the spaces they all have."""

    group_id: str
    agents: tuple[str, ...]
    observation_space: spaces.Space
    action_space: spaces.Space


def group_of(agent_id: str) -> str:
    """The group of ``agent_id``: ``"bob_1"`` -> ``"bob"``, ``"red_team_0"`` -> ``"red_team"``;
    ids without a numeric suffix (``"referee"``, ``"bob_x"``) are their own group."""
    head, sep, tail = agent_id.rpartition("_")
    return head if sep and head and tail.isdigit() else agent_id


def agent_groups(env: Any) -> dict[str, AgentGroup]:
    """Groups of ``env``'s possible agents, in first-appearance order.

    Raises ValueError when agents of one group have different spaces (they cannot share a
    policy); the message names both agents and both spaces.
    """
    obs_space = getattr(env, "single_observation_space", None) or env.observation_space
    act_space = getattr(env, "single_action_space", None) or env.action_space
    members: dict[str, list[str]] = {}
    for agent in env.possible_agents:
        members.setdefault(group_of(agent), []).append(agent)
    groups: dict[str, AgentGroup] = {}
    for gid, agents in members.items():
        first = agents[0]
        for other in agents[1:]:
            for kind, get in (("observation", obs_space), ("action", act_space)):
                if get(other) != get(first):
                    raise ValueError(
                        f"group {gid!r}: {kind} space of {other!r} ({get(other)}) differs from "
                        f"that of {first!r} ({get(first)}), so they cannot share parameters"
                    )
        groups[gid] = AgentGroup(gid, tuple(agents), obs_space(first), act_space(first))
    return groups
