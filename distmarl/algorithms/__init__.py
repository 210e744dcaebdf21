"""Multi-agent learners behind one interface (:class:`Algorithm`); no Ray, no MLflow."""

from distmarl.algorithms.base import Algorithm
from distmarl.algorithms.hparams import MADDPG_HP, MATD3_HP
from distmarl.algorithms.maddpg import MADDPG
from distmarl.algorithms.matd3 import MATD3
from distmarl.algorithms.noise import GaussianNoise, OUNoise, make_noise

__all__ = ["MADDPG", "MADDPG_HP", "MATD3", "MATD3_HP", "Algorithm", "GaussianNoise", "OUNoise",
           "make_noise"]
