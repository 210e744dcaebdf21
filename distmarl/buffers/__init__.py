"""Replay storage (no Ray): preallocated per-agent rings, mix-in sampling, Arrow files."""

from distmarl.buffers.replay import MultiAgentReplayBuffer
from distmarl.buffers.sampling import SampleToInsertRatio

__all__ = ["MultiAgentReplayBuffer", "SampleToInsertRatio"]
