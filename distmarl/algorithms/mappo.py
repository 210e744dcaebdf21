"""MAPPO (Yu et al. 2022, https://arxiv.org/abs/2103.01955): PPO with decentralised policies and
a centralised value function, with IPPO's parameter sharing per agent group.

The value network of group ``g`` reads an *agent-specific joint observation*, MAPPO's
"agent-specific global state" in its simplest form: the agent's own (network) observation first,
then every other agent's in the env's agent order, ``(..., sum obs_dim)``. Every agent of a
group gets the same layout (they share their spaces), so the shared value network learns one
function of an ego-centric joint state: it sees all that IPPO's value network sees, in the same
place, plus the others' observations. (A fixed agent order with a one-hot of the agent's index
instead makes the shared network learn one function per agent from the same data; on
``simple_spread`` that scored below IPPO.) Agents absent at a step contribute zeros.

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
        return sum(self.obs_dims.values())

    def _critic_inputs(self, group: str, obs: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        """``[obs[agent], obs of the other agents in env order]`` per agent of ``group``,
        ``(..., critic_dim)``."""
        return [torch.cat([obs[a], *(obs[b] for b in self.agents if b != a)], dim=-1)
                for a in self.groups[group]]
