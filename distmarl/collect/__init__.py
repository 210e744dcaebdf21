"""The env-policy loops, no Ray: the rollout :class:`Collector` (both families) and
evaluation without exploration."""

from distmarl.collect.collector import Collector, EpisodeScores, Rollout, fragment_to_batch
from distmarl.collect.evaluation import EVAL_EPISODES_PER_ENV, evaluate, progress_score

__all__ = ["EVAL_EPISODES_PER_ENV", "Collector", "EpisodeScores", "Rollout", "evaluate",
           "fragment_to_batch", "progress_score"]
