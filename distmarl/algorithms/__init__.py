"""Multi-agent learners behind one interface (:class:`Algorithm`); no Ray, no MLflow."""

from distmarl.algorithms.base import Algorithm
from distmarl.algorithms.hparams import MADDPG_HP, MATD3_HP
from distmarl.algorithms.ippo import IPPO
from distmarl.algorithms.maddpg import MADDPG
from distmarl.algorithms.mappo import MAPPO
from distmarl.algorithms.matd3 import MATD3
from distmarl.algorithms.noise import GaussianNoise, OUNoise, make_noise
from distmarl.algorithms.on_policy import ON_POLICY_FIELDS
from distmarl.algorithms.ppo_hparams import PPO_HP

__all__ = ["IPPO", "MADDPG", "MADDPG_HP", "MAPPO", "MATD3", "MATD3_HP", "ON_POLICY_FIELDS",
           "PPO_HP", "Algorithm", "GaussianNoise", "OUNoise", "make_noise"]
