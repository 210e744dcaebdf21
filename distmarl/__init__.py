"""distmarl: a Ray-distributed population trainer for multi-agent reinforcement learning."""

__version__ = "0.1.0"
