"""The off-policy family: decentralised actors and centralised critics learning from replay
(MADDPG, MATD3), with exploration noise."""

from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.algorithms.offpolicy.maddpg import MADDPG
from distmarl.algorithms.offpolicy.matd3 import MATD3

__all__ = ["MADDPG", "MATD3", "OffPolicyMultiAgent"]
