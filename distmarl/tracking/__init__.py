"""Run tracking (MLflow) and plots. Only the coordinator process uses a tracker."""

from distmarl.tracking.base import NullTracker, Tracker, split_key

__all__ = ["NullTracker", "Tracker", "split_key"]
