"""MAPPO (Yu et al. 2022, https://arxiv.org/abs/2103.01955): PPO with decentralised policies and
a centralised value function, with IPPO's parameter sharing per agent group.

The value network of group ``g`` reads the *joint observation*: every agent's (network)
observation concatenated in the env's agent order, ``(..., sum obs_dim)``. When ``g`` has more
than one agent, a one-hot of the agent's index within the group is appended, so the shared value
network can tell whose return it predicts (agents of a group may get different rewards, e.g. the
local collision penalty of ``simple_spread``); MAPPO's "agent-specific global state" in its
simplest form. Agents absent at a step contribute zeros.

An env's own global state (``env.state()``) is not used yet: rollouts do not record it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from distmarl.algorithms.on_policy import OnPolicyMultiAgent
from distmarl.algorithms.ppo_hparams import PPO_HP


class MAPPO(OnPolicyMultiAgent):
    """Multi-agent PPO: shared decentralised policies, centralised value over the joint observation.

    ``MAPPO(observation_spaces, action_spaces, net_config, hp=None, device="cpu", seed=None)``;
    ``hp`` overrides :data:`distmarl.algorithms.ppo_hparams.PPO_HP`.
    """

    name: ClassVar[str] = "MAPPO"
    DEFAULT_HP: ClassVar[dict[str, Any]] = PPO_HP

    def _critic_dim(self, group: str) -> int:
        size = len(self.groups[group])
        return sum(self.obs_dims.values()) + (size if size > 1 else 0)

    def _critic_inputs(self, group: str, obs: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        """``[joint_obs, one_hot(index in group)]`` per agent of ``group``, ``(..., critic_dim)``."""
        joint = torch.cat([obs[a] for a in self.agents], dim=-1)
        members = self.groups[group]
        if len(members) == 1:
            return [joint]
        eye = torch.eye(len(members), dtype=joint.dtype, device=joint.device)
        return [torch.cat([joint, eye[i].expand(*joint.shape[:-1], len(members))], dim=-1)
                for i in range(len(members))]
