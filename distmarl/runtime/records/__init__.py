"""What a run leaves behind: metrics at their cadence, checkpoints, tracking runs, plots, the
elite model and videos, all written from the coordinator's process."""
