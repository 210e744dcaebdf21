"""The env-policy loops, no Ray: the rollout :class:`Collector` (both families) and
evaluation without exploration."""

from distmarl.collect.collector import Collector, EpisodeScores, Rollout, fragment_to_batch
from distmarl.collect.evaluation import (
    EVAL_EPISODES_PER_ENV,
    RandomPolicy,
    Seats,
    episode_returns,
    evaluate,
    fixed_scores,
    progress_score,
)

__all__ = ["EVAL_EPISODES_PER_ENV", "Collector", "EpisodeScores", "RandomPolicy", "Rollout",
           "Seats", "episode_returns", "evaluate", "fixed_scores", "fragment_to_batch",
           "progress_score"]
