"""The on-policy family: PPO learners with one policy and one value network per agent group,
learning once from each rollout fragment of their own policy (IPPO, MAPPO)."""

from distmarl.algorithms.onpolicy.ippo import IPPO
from distmarl.algorithms.onpolicy.mappo import MAPPO
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent

__all__ = ["IPPO", "MAPPO", "OnPolicyMultiAgent"]
