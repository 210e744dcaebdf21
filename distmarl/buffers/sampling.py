"""Which rows a sample returns: per-consumer mix-in of new rows, uniform replay, rate limiting.

Pure index arithmetic over :class:`~distmarl.buffers.storage.RingStorage`'s global row indices;
nothing here copies row data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distmarl.buffers.storage import RingStorage


@dataclass
class ConsumerState:
    """One reader's position in the stream of rows.

    ``cursor`` is the global index of the first row this consumer has not yet received as new;
    ``dropped`` counts rows that were overwritten before it received them.
    """

    cursor: int = 0
    received_new: int = 0
    dropped: int = 0


def new_row_share(batch_size: int, replay_ratio: float | None) -> int:
    """How many of ``batch_size`` rows should be new rows: ``round(batch_size * (1 - r))``."""
    if replay_ratio is None:
        return 0
    return int(round(batch_size * (1.0 - replay_ratio)))


def take_new_rows(
    storage: RingStorage, consumer: ConsumerState, limit: int, member: int | None
) -> np.ndarray:
    """Advance ``consumer`` over up to ``limit`` unreceived rows, oldest first; return them.

    With ``member`` set, rows of other members are skipped (they are not for this consumer).
    """
    start = max(consumer.cursor, storage.oldest)
    consumer.dropped += start - consumer.cursor
    if limit <= 0 or start >= storage.counter:
        consumer.cursor = start
        return np.empty(0, dtype=np.int64)
    if member is None:
        stop = min(storage.counter, start + limit)
        taken = np.arange(start, stop, dtype=np.int64)
        consumer.cursor = stop
    else:
        candidates = np.arange(start, storage.counter, dtype=np.int64)
        mine = candidates[storage.members_of(candidates) == member]
        taken = mine[:limit]
        consumer.cursor = int(taken[-1]) + 1 if len(taken) == limit else storage.counter
    consumer.received_new += len(taken)
    return taken


def uniform_rows(
    storage: RingStorage, count: int, rng: np.random.Generator, member: int | None
) -> np.ndarray:
    """``count`` stored rows drawn uniformly with replacement (only ``member``'s when given)."""
    if count <= 0 or storage.size == 0:
        return np.empty(0, dtype=np.int64)
    if member is None:
        return storage.oldest + rng.integers(0, storage.size, size=count, dtype=np.int64)
    stored = storage.stored_indices()
    mine = stored[storage.members_of(stored) == member]
    if len(mine) == 0:
        return np.empty(0, dtype=np.int64)
    return mine[rng.integers(0, len(mine), size=count)]


class SampleToInsertRatio:
    """Reverb's ``SampleToInsertRatio`` rate limiter, counted in rows.

    Each inserted row allows ``samples_per_insert`` sampled rows. Once ``min_size_to_sample``
    rows are stored, ``inserts * samples_per_insert - samples`` must stay within
    ``offset ± error_buffer`` where ``offset = samples_per_insert * min_size_to_sample``:
    samplers that run ahead are refused until more rows arrive, and writers that run ahead are
    refused until more rows are sampled. ``error_buffer`` must exceed a batch (and a chunk) or
    neither side can move.
    """

    def __init__(self, samples_per_insert: float, error_buffer: float, min_size_to_sample: int) -> None:
        if samples_per_insert <= 0:
            raise ValueError(f"samples_per_insert must be > 0, got {samples_per_insert}")
        if error_buffer <= 0:
            raise ValueError(f"error_buffer must be > 0, got {error_buffer}")
        self.samples_per_insert = float(samples_per_insert)
        self.error_buffer = float(error_buffer)
        self.min_size_to_sample = max(1, int(min_size_to_sample))
        offset = self.samples_per_insert * self.min_size_to_sample
        self.min_diff = offset - self.error_buffer
        self.max_diff = offset + self.error_buffer
        self.inserts = 0
        self.samples = 0

    def diff(self, extra_inserts: int = 0, extra_samples: int = 0) -> float:
        return (self.inserts + extra_inserts) * self.samples_per_insert - (
            self.samples + extra_samples
        )

    def can_insert(self, n: int, size: int) -> bool:
        if size + n <= self.min_size_to_sample:
            return True
        return self.diff(extra_inserts=n) <= self.max_diff

    def can_sample(self, n: int, size: int) -> bool:
        return size >= self.min_size_to_sample and self.diff(extra_samples=n) >= self.min_diff

    def state_dict(self) -> dict[str, Any]:
        return {"inserts": self.inserts, "samples": self.samples}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.inserts = int(state["inserts"])
        self.samples = int(state["samples"])
