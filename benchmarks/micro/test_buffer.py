"""Replay buffer calls with speaker-listener's shapes (:mod:`benchmarks.micro.buffer_bench`):
adding a vectorised step, sampling a learner's batch, and prioritised replay's full round."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks.micro.buffer_bench import AGENTS, FIELDS, PlainRing, make_step
from distmarl.buffers import MultiAgentReplayBuffer

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark: the bench extra")

CAPACITY = 100_000
PER = {"alpha": 0.6, "beta": 0.4, "eps": 1e-6}


def filled(prioritized: dict[str, float] | None = None) -> MultiAgentReplayBuffer:
    """A buffer of :data:`CAPACITY` rows, full, mixing in half replayed rows per sample."""
    buf = MultiAgentReplayBuffer(CAPACITY, FIELDS, AGENTS, seed=0, replay_ratio=0.5,
                                 prioritized=prioritized)
    big = make_step(1000, np.random.default_rng(1))
    for _ in range(CAPACITY // 1000):
        buf.save_to_memory(*big, is_vectorised=True)
    return buf


@pytest.mark.benchmark(group="buffer: add 8 rows")
def test_distmarl_add(benchmark: Any) -> None:
    buf = MultiAgentReplayBuffer(CAPACITY, FIELDS, AGENTS, seed=0)
    step = make_step(8, np.random.default_rng(0))
    benchmark(buf.save_to_memory, *step, is_vectorised=True)


@pytest.mark.benchmark(group="buffer: add 8 rows")
def test_plain_ring_add(benchmark: Any) -> None:
    ring = PlainRing(CAPACITY)
    benchmark(ring.add, make_step(8, np.random.default_rng(0)))


@pytest.mark.benchmark(group="buffer: sample 1024 rows")
def test_distmarl_sample(benchmark: Any) -> None:
    buf = filled()
    batch = benchmark(buf.read, 1024, "learner")
    assert batch is not None


@pytest.mark.benchmark(group="buffer: sample 1024 rows")
def test_prioritized_sample_and_update(benchmark: Any) -> None:
    buf = filled(PER)
    errors = np.random.default_rng(2).random(1024)

    def round_trip() -> None:
        batch = buf.read(1024, "learner")
        assert batch is not None
        buf.update_priorities("learner", batch.indices, errors)

    benchmark(round_trip)
