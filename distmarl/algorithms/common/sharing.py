"""``net_config`` for learners that share parameters per agent group (:mod:`distmarl.agents`;
IPPO / MAPPO: one policy and one value network per group, AgileRL's homogeneous agents), so
``net_config`` comes once, or per group.

``net_config`` forms accepted (see :mod:`distmarl.networks.net_config` for one config's keys):

1. one config for every group: ``{"latent_dim": ..., "encoder_config": ..., ...}``;
2. one per group: ``{"agent": {...}}`` for agents ``agent_0, agent_1, agent_2``;
3. a per-agent key is accepted only for an agent that is alone in its group (``speaker_0`` of
   group ``speaker``), where it means the same as the group key. A per-agent key for an agent
   that shares its group is a :class:`~distmarl.networks.NetConfigError` saying so: the
   group's agents share one network, so they cannot be configured one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distmarl.agents import group_of
from distmarl.networks import NetConfigError, resolve_net_config
from distmarl.networks.inputs import InputSpec
from distmarl.networks.net_config import NET_CONFIG_KEYS, AgentNetConfig


def group_net_configs(net_config: Mapping[str, Any] | None, groups: Mapping[str, list[str]],
                      algorithm: str, inputs: Mapping[str, InputSpec] | None = None
                      ) -> dict[str, AgentNetConfig]:
    """One complete network config per group (see the module docstring) for networks reading
    ``inputs[group]`` (default: vectors)."""
    raw = dict(net_config or {})
    if all(k in NET_CONFIG_KEYS for k in raw):
        return resolve_net_config(raw, list(groups), inputs)
    by_group: dict[str, Any] = {}
    for key, cfg in raw.items():
        gid = key if key in groups else group_of(key)
        if key not in groups and key in groups.get(gid, ()):
            if len(groups[gid]) > 1:
                raise NetConfigError(
                    f"{algorithm} shares one policy and one value network per agent group, so "
                    f"net_config is given per group, not per agent: key {key!r} names one agent "
                    f"of group {gid!r} (agents {groups[gid]}); put its config under {gid!r}")
        elif key not in groups:
            gid = key  # unknown: let resolve_net_config report it with the valid keys
        if gid in by_group:
            raise NetConfigError(f"group {gid!r} is configured twice in net_config (once as "
                                 f"{key!r}); keep one of them")
        by_group[gid] = cfg
    return resolve_net_config(by_group, list(groups), inputs)
