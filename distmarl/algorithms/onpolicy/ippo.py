"""IPPO (de Witt et al. 2020, https://arxiv.org/abs/2011.09533): independent PPO per agent, with
parameter sharing per agent group, as AgileRL's ``IPPO`` does.

Agents ``<group>_<idx>`` with the same spaces share one policy and one value network; both read
only the agent's own observation. ``net_config`` is one config, or one per group (a per-agent key
for an agent that shares its group is an error; see
:mod:`distmarl.algorithms.common.sharing`). The PPO machinery (GAE, clipped objective, masks,
minibatches) is in :mod:`distmarl.algorithms.onpolicy.ppo`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.config.hparams import default_hp


class IPPO(OnPolicyMultiAgent):
    """Independent PPO with parameter sharing per agent group.

    ``IPPO(observation_spaces, action_spaces, net_config, hp=None, device="cpu", seed=None)``;
    ``hp`` overrides :class:`distmarl.config.hparams.IPPOHyperparameters`.
    """

    name: ClassVar[str] = "IPPO"
    DEFAULT_HP: ClassVar[dict[str, Any]] = default_hp("IPPO")
