"""Prioritised replay (Schaul et al. 2016): a sum-tree of priorities per consumer.

Each consumer (one learner) keeps its own priorities over the ring's positions rather than one
tree shared by every reader: a row's priority is the size of *that learner's* TD error, and
members of a population (of different algorithms, learning rates, critics) disagree on which
rows surprise them. One learner's errors steering another's replay would make members' data
depend on each other's critics. A tree costs two float64 per ring slot per consumer.

A row enters a consumer's tree at the largest priority that consumer has seen (so every row is
replayed at least once soon after it arrives), rows of other members at 0 when the consumer
reads one member's rows only. Probabilities are ``p_i ** alpha / sum_j p_j ** alpha`` with
``p = |td error| + eps``; importance weights ``(N * P(i)) ** -beta`` are divided by the batch's
largest weight (so they lie in ``(0, 1]`` and ``N`` cancels; the ring's smallest probability
would need a second tree and only rescales the step size).

Pure index arithmetic over :class:`~distmarl.buffers.storage.RingStorage`'s global row indices;
the tree's loops are compiled (:mod:`distmarl.buffers.sumtree`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distmarl.buffers.storage import RingStorage
from distmarl.buffers.sumtree import SumTree

_NO_ROWS = np.empty(0, dtype=np.int64)


@dataclass(frozen=True)
class PriorityParams:
    """``alpha`` (0: uniform, 1: fully proportional), ``beta`` (importance-weight exponent,
    1: full correction) and ``eps`` (added to every |td error| so no row is never drawn)."""

    alpha: float = 0.6
    beta: float = 0.4
    eps: float = 1e-6

    def __post_init__(self) -> None:
        check_priority_params(self.alpha, self.beta, self.eps)


def check_priority_params(alpha: float, beta: float, eps: float | None = None) -> None:
    """ValueError naming the first of ``alpha >= 0``, ``0 <= beta <= 1``, ``eps > 0`` broken."""
    if not float(alpha) >= 0.0:
        raise ValueError(f"prioritized_replay_alpha must be >= 0, got {alpha}")
    if not 0.0 <= float(beta) <= 1.0:
        raise ValueError(f"prioritized_replay_beta must be in [0, 1], got {beta}")
    if eps is not None and not float(eps) > 0.0:
        raise ValueError(f"prioritized_replay_eps must be > 0, got {eps}")


class ConsumerPriorities:
    """One consumer's priorities over the ring's positions (see the module docstring).

    :param capacity: the ring's capacity (one leaf per position).
    :param member: when set, only that member's rows are ever drawn.
    """

    def __init__(self, capacity: int, alpha: float, member: int | None) -> None:
        self.capacity = int(capacity)
        self.alpha = float(alpha)
        self.member = member
        self.raw = np.zeros(self.capacity, dtype=np.float64)  # |td| + eps, 0: never drawn
        self.tree = SumTree(self.capacity)
        self.synced = 0  # global index of the first row not yet entered
        self.max_priority = 1.0  # new rows enter at the largest priority seen

    def set_alpha(self, alpha: float) -> None:
        """A new exponent: every leaf recomputed from the kept raw priorities."""
        if float(alpha) == self.alpha:
            return
        self.alpha = float(alpha)
        leaves = np.zeros(self.tree.leaves)
        leaves[: self.capacity] = self.raw ** self.alpha * (self.raw > 0)
        self.tree.rebuild(leaves)

    def sync(self, storage: RingStorage) -> None:
        """Enter the rows added since the last sync (older ones the ring overwrote are gone)."""
        start = max(self.synced, storage.oldest)
        if start < storage.counter:
            rows = np.arange(start, storage.counter, dtype=np.int64)
            raw = np.full(len(rows), self.max_priority)
            if self.member is not None:
                raw[storage.members_of(rows) != self.member] = 0.0
            self._set(storage.positions(rows), raw)
        self.synced = storage.counter

    def draw(self, storage: RingStorage, count: int, beta: float, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray]:
        """``count`` global row indices drawn in proportion to ``p ** alpha`` (one uniform draw
        per equal slice of the total, as in the paper) and their importance weights."""
        self.sync(storage)
        if count <= 0 or self.tree.total <= 0.0:
            return _NO_ROWS, np.empty(0, dtype=np.float32)
        pos, weights = self.tree.draw(rng.random(count), beta)
        return _global(storage, pos), weights

    def update(self, storage: RingStorage, indices: np.ndarray, td_errors: np.ndarray,
               eps: float) -> int:
        """Priorities ``|td_errors| + eps`` for the rows at global ``indices`` that are still
        stored and entered (a row the ring overwrote since it was sampled keeps its new
        row's priority); returns how many rows were updated."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        errors = np.asarray(td_errors, dtype=np.float64).reshape(-1)
        if len(indices) != len(errors):
            raise ValueError(f"update_priorities got {len(indices)} indices and "
                             f"{len(errors)} td errors")
        n, largest = self.tree.update(self.raw, indices, errors, storage.oldest, self.synced,
                                      eps, self.alpha)
        self.max_priority = max(self.max_priority, largest)
        return n

    def state_dict(self, storage: RingStorage | None) -> dict[str, Any]:
        """``alpha``, ``synced``, ``max_priority``, ``member`` and ``priorities``: the raw
        priority of every stored row, oldest first (aligned with the storage's state)."""
        raw = self.raw[storage.positions(storage.stored_indices())] if storage else self.raw[:0]
        return {"alpha": self.alpha, "synced": self.synced, "max_priority": self.max_priority,
                "member": self.member, "priorities": raw.copy()}

    @classmethod
    def from_state(cls, capacity: int, state: Mapping[str, Any], counter: int
                   ) -> ConsumerPriorities:
        """Priorities from :meth:`state_dict`, for a storage whose newest row is ``counter - 1``
        (a larger buffer's state keeps the newest ``capacity`` rows, as storage does)."""
        member = state["member"]
        out = cls(capacity, float(state["alpha"]), None if member is None else int(member))
        raw = np.asarray(state["priorities"], dtype=np.float64)
        keep = min(len(raw), out.capacity)
        rows = np.arange(counter - keep, counter, dtype=np.int64)
        out._set(rows % out.capacity, raw[len(raw) - keep:])
        out.synced = min(int(state["synced"]), counter)
        out.max_priority = float(state["max_priority"])
        return out

    def _set(self, positions: np.ndarray, raw: np.ndarray) -> None:
        self.raw[positions] = raw
        self.tree.set(positions, raw, self.alpha)


def _global(storage: RingStorage, positions: np.ndarray) -> np.ndarray:
    """Global indices of the stored rows at ring ``positions``."""
    cap = storage.capacity
    oldest = storage.oldest
    out: np.ndarray = oldest + (positions - oldest % cap) % cap
    return out
