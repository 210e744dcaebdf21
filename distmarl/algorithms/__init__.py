"""Multi-agent learners behind one interface (:class:`Algorithm`), by family: ``offpolicy``
(MADDPG, MATD3), ``onpolicy`` (IPPO, MAPPO), and what both use in ``common``; no Ray, no
MLflow. :mod:`distmarl.algorithms.registry` maps config names to classes."""

from distmarl.algorithms.base import Algorithm
from distmarl.algorithms.hparams import MADDPG_HP, MATD3_HP
from distmarl.algorithms.offpolicy import MADDPG, MATD3
from distmarl.algorithms.offpolicy.noise import GaussianNoise, OUNoise, make_noise
from distmarl.algorithms.onpolicy import IPPO, MAPPO
from distmarl.algorithms.onpolicy.fragment import ON_POLICY_FIELDS
from distmarl.algorithms.ppo_hparams import PPO_HP
from distmarl.algorithms.registry import ALGORITHMS, algorithm_class

__all__ = ["ALGORITHMS", "IPPO", "MADDPG", "MADDPG_HP", "MAPPO", "MATD3", "MATD3_HP",
           "ON_POLICY_FIELDS", "PPO_HP", "Algorithm", "GaussianNoise", "OUNoise",
           "algorithm_class", "make_noise"]
