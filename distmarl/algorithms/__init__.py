"""Multi-agent learners behind one interface (:class:`Algorithm`); no Ray, no MLflow."""

from distmarl.algorithms.base import Algorithm
from distmarl.algorithms.ippo import IPPO
from distmarl.algorithms.maddpg import MADDPG
from distmarl.algorithms.mappo import MAPPO
from distmarl.algorithms.matd3 import MATD3
from distmarl.algorithms.noise import GaussianNoise, OUNoise, make_noise
from distmarl.algorithms.on_policy import ON_POLICY_FIELDS

__all__ = ["IPPO", "MADDPG", "MAPPO", "MATD3", "ON_POLICY_FIELDS", "Algorithm", "GaussianNoise",
           "OUNoise", "make_noise"]
