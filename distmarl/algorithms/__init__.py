"""Multi-agent learners behind one interface (:class:`Algorithm`), by family: ``offpolicy``
(MADDPG, MATD3), ``onpolicy`` (IPPO, MAPPO), and what both use in ``common``; no Ray, no
MLflow. :mod:`distmarl.algorithms.registry` maps config names to classes."""

from distmarl.algorithms.base import Acting, Algorithm, FragmentLearner, Policy, ReplayLearner
from distmarl.algorithms.offpolicy import MADDPG, MATD3
from distmarl.algorithms.offpolicy.noise import GaussianNoise, OUNoise, make_noise
from distmarl.algorithms.onpolicy import IPPO, MAPPO
from distmarl.algorithms.registry import ALGORITHMS, algorithm_class
from distmarl.types import ON_POLICY_FIELDS

__all__ = ["ALGORITHMS", "IPPO", "MADDPG", "MAPPO", "MATD3", "ON_POLICY_FIELDS", "Acting",
           "Algorithm",
           "FragmentLearner", "GaussianNoise", "OUNoise", "Policy", "ReplayLearner",
           "algorithm_class", "make_noise"]
