"""Which rows a sample returns: per-consumer new rows, uniform or prioritised replay, rate
limiting.

A batch of ``batch_size`` rows drawn with ``replay_ratio``:

- ``None``: uniform replay, every row drawn uniformly (with replacement) from the stored rows.
- ``r`` in ``(0, 1)``, mix-in, in one of two modes (the buffer's ``mixin``):

  - ``"fixed"`` (the default): always ``batch_size`` rows. The new part is the *newest*
    ``round(batch_size * (1 - r))`` rows this consumer has not received, the rest uniform
    replay (a row added just before a sample comes back in that sample). Older unreceived
    rows are passed over: they are never returned as new, stay reachable by replay, and are
    counted in the consumer's ``skipped``. With no new rows the batch is all replay.
  - ``"rllib"``: RLlib's ``MultiAgentMixInReplayBuffer``, a batch of variable size. The new
    part is the *oldest* unreceived rows, up to ``batch_size * (1 - r)`` rounded up or down
    at random to that mean; unreceived rows beyond it stay queued for later samples. Replay
    rows are added in the ratio: ``batch_size - new_share`` when the new part is full, else
    ``n_new * r / (1 - r)`` rounded at random (never more than ``batch_size - new_share``).
    One new row at ``r=0.333`` and ``batch_size=5`` gives 1.5 rows on average. With no new
    rows nothing is returned.

  A consumer seen for the first time starts at the oldest stored row.
- ``0``, streaming: only new rows, each exactly once and oldest first (an on-policy learner
  reads its member's rows this way); a batch holds fewer rows when fewer are new.

Rows the ring overwrote before a consumer received them count as its ``dropped`` in every
mode. Pure index arithmetic over :class:`~distmarl.buffers.storage.RingStorage`'s global row
indices; nothing here copies row data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from distmarl.buffers.priorities import (
    ConsumerPriorities,
    PriorityParams,
    check_priority_params,
)
from distmarl.buffers.storage import RingStorage

_NO_ROWS = np.empty(0, dtype=np.int64)
#: The buffer's ``mixin`` settings (see the module docstring).
MIXIN_MODES = ("fixed", "rllib")


@dataclass
class ConsumerState:
    """One reader's position in the stream of rows, and its counters.

    ``cursor``: global index of the first row this consumer has neither received as new nor
    passed over. ``received_new``: rows returned to it as new. ``dropped``: rows the ring
    overwrote before it received or passed over them. ``skipped``: rows passed over by mix-in
    sampling because newer rows filled the new part (still reachable by replay).
    """

    cursor: int = 0
    received_new: int = 0
    dropped: int = 0
    skipped: int = 0

    def stream(self, storage: RingStorage, limit: int, member: int | None) -> np.ndarray:
        """Up to ``limit`` unreceived rows, oldest first; the cursor moves past them only.

        With ``member`` set, rows of other members are skipped over (they are not for this
        consumer) without counting.
        """
        start = self._first_stored(storage)
        if limit <= 0 or start >= storage.counter:
            return _NO_ROWS
        if member is None:
            stop = min(storage.counter, start + limit)
            taken = np.arange(start, stop, dtype=np.int64)
            self.cursor = stop
        else:
            mine = _member_rows(storage, start, member)
            taken = mine[:limit]
            self.cursor = int(taken[-1]) + 1 if len(taken) == limit else storage.counter
        self.received_new += len(taken)
        return taken

    def mix_in(self, storage: RingStorage, limit: int, member: int | None) -> np.ndarray:
        """The newest ``limit`` unreceived rows (``member``'s only when given), in insertion
        order; every older unreceived row is passed over, so the cursor moves to the end."""
        start = self._first_stored(storage)
        stop = storage.counter
        if member is None:
            unreceived = stop - start
            taken = np.arange(stop - min(max(limit, 0), unreceived), stop, dtype=np.int64)
        else:
            mine = _member_rows(storage, start, member) if start < stop else _NO_ROWS
            unreceived = len(mine)
            taken = mine[unreceived - min(max(limit, 0), unreceived):]
        self.cursor = stop
        self.received_new += len(taken)
        self.skipped += unreceived - len(taken)
        return taken

    def pending(self, storage: RingStorage | None) -> int:
        """Unreceived rows still stored (of any member)."""
        if storage is None:
            return 0
        return max(0, storage.counter - max(self.cursor, storage.oldest))

    def state_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ConsumerState:
        """A consumer from :meth:`state_dict` (a state without ``skipped`` counts none)."""
        return cls(cursor=int(state["cursor"]), received_new=int(state["received_new"]),
                   dropped=int(state["dropped"]), skipped=int(state.get("skipped", 0)))

    def _first_stored(self, storage: RingStorage) -> int:
        """Move the cursor past rows the ring overwrote (counting them) and return it."""
        start = max(self.cursor, storage.oldest)
        self.dropped += start - self.cursor
        self.cursor = start
        return start


def _member_rows(storage: RingStorage, start: int, member: int) -> np.ndarray:
    """Global indices of ``member``'s rows from ``start`` to the newest, in insertion order."""
    candidates = np.arange(start, storage.counter, dtype=np.int64)
    mine: np.ndarray = candidates[storage.members_of(candidates) == member]
    return mine


def check_ratio(replay_ratio: float | None) -> float | None:
    """The ratio as given (None or in ``[0, 1)``), else ValueError naming it."""
    if replay_ratio is not None and not 0.0 <= float(replay_ratio) < 1.0:
        raise ValueError(f"replay_ratio must be None or in [0, 1), got {replay_ratio}")
    return replay_ratio


def new_row_share(batch_size: int, replay_ratio: float | None) -> int:
    """How many of ``batch_size`` rows should be new rows: ``round(batch_size * (1 - r))``."""
    if replay_ratio is None:
        return 0
    return round(batch_size * (1.0 - replay_ratio))


def random_round(value: float, rng: np.random.Generator) -> int:
    """``value`` rounded up with probability ``value % 1``, else down: an integer whose mean
    is ``value`` (RLlib's ``round_up_or_down``)."""
    low = int(np.floor(value))
    return low + int(rng.random() < value - low)


def uniform_rows(
    storage: RingStorage, count: int, rng: np.random.Generator, member: int | None
) -> np.ndarray:
    """``count`` stored rows drawn uniformly with replacement (only ``member``'s when given)."""
    if count <= 0 or storage.size == 0:
        return _NO_ROWS
    if member is None:
        return storage.oldest + rng.integers(0, storage.size, size=count, dtype=np.int64)
    stored = storage.stored_indices()
    mine = stored[storage.members_of(stored) == member]
    if len(mine) == 0:
        return _NO_ROWS
    drawn: np.ndarray = mine[rng.integers(0, len(mine), size=count)]
    return drawn


class Sampler:
    """The consumers' cursors and the replay generator: picks the global rows of each batch.

    :param seed: seed of the generator that draws replay rows.
    :param prioritized: prioritised replay's parameters (None: uniform replay). The replay
        part of a batch is then drawn from the consumer's own priorities
        (:mod:`distmarl.buffers.priorities`); new rows of the mix-in part get weight 1.
    """

    def __init__(self, seed: int | None, prioritized: PriorityParams | None = None,
                 mixin: str = "fixed") -> None:
        if mixin not in MIXIN_MODES:
            raise ValueError(f"mixin must be one of {list(MIXIN_MODES)}, got {mixin!r}")
        self.rng = np.random.default_rng(seed)
        self.prioritized = prioritized
        self.mixin = mixin
        self.consumers: dict[str, ConsumerState] = {}
        self.priorities: dict[str, ConsumerPriorities] = {}

    def consumer(self, name: str, storage: RingStorage | None) -> ConsumerState:
        """The named consumer; a new one starts at the oldest stored row."""
        state = self.consumers.get(name)
        if state is None:
            oldest = 0 if storage is None else storage.oldest
            state = self.consumers[name] = ConsumerState(cursor=oldest)
        return state

    def draw(self, storage: RingStorage, batch_size: int, consumer: str, member: int | None,
             replay_ratio: float | None, alpha: float | None = None, beta: float | None = None
             ) -> tuple[np.ndarray, int, np.ndarray | None]:
        """Global indices of one batch, new rows first, how many are new, and the rows'
        importance weights (None without prioritised replay). See the module docstring for
        what each ``replay_ratio`` returns; ``alpha`` and ``beta`` override the buffer's
        prioritised-replay exponents for this consumer (a member's own, evolved values)."""
        state = self.consumer(consumer, storage)
        if replay_ratio == 0:
            new = state.stream(storage, batch_size, member)
            return new, len(new), None
        if replay_ratio is None:
            new, num_replay = _NO_ROWS, batch_size
        elif self.mixin == "rllib":
            new, num_replay = self._rllib_split(state, storage, batch_size, member, replay_ratio)
            if len(new) == 0:
                return _NO_ROWS, 0, None
        else:
            new = state.mix_in(storage, new_row_share(batch_size, replay_ratio), member)
            num_replay = batch_size - len(new)
        if self.prioritized is None:
            replay = uniform_rows(storage, num_replay, self.rng, member)
            return (np.concatenate([new, replay]) if len(new) else replay), len(new), None
        tree = self._tree(consumer, storage, member, alpha)
        replay, weights = tree.draw(storage, num_replay, self._beta(beta), self.rng)
        ones = np.ones(len(new), dtype=np.float32)
        return np.concatenate([new, replay]), len(new), np.concatenate([ones, weights])

    def _rllib_split(self, state: ConsumerState, storage: RingStorage, batch_size: int,
                     member: int | None, replay_ratio: float) -> tuple[np.ndarray, int]:
        """RLlib's mix-in (module docstring): the oldest unreceived rows up to a randomly
        rounded new share, and how many replay rows go with them."""
        share = batch_size * (1.0 - replay_ratio)
        max_new = random_round(share, self.rng)
        new = state.stream(storage, max_new, member)
        if np.isclose(len(new), share):
            return new, batch_size - max_new
        in_ratio = random_round(len(new) * replay_ratio / (1.0 - replay_ratio), self.rng)
        return new, min(batch_size - max_new, in_ratio)

    def update_priorities(self, storage: RingStorage, consumer: str, indices: np.ndarray,
                          td_errors: np.ndarray) -> int:
        """``consumer``'s priorities of the rows at ``indices`` from their TD errors; rows
        overwritten since they were sampled are left out. Returns rows updated."""
        if self.prioritized is None:
            raise ValueError("update_priorities needs a prioritized buffer "
                             "(buffer.prioritized_replay is off)")
        tree = self.priorities.get(consumer)
        if tree is None:
            raise ValueError(f"consumer {consumer!r} has sampled nothing: no priorities to update")
        return tree.update(storage, indices, td_errors, self.prioritized.eps)

    def _tree(self, consumer: str, storage: RingStorage, member: int | None,
              alpha: float | None) -> ConsumerPriorities:
        assert self.prioritized is not None
        a = self.prioritized.alpha if alpha is None else float(alpha)
        tree = self.priorities.get(consumer)
        if tree is None:
            check_priority_params(a, self.prioritized.beta)
            tree = self.priorities[consumer] = ConsumerPriorities(storage.capacity, a, member)
        elif tree.member != member:
            raise ValueError(f"consumer {consumer!r} sampled member {tree.member}'s rows "
                             f"before; it cannot sample member {member}'s")
        if a != tree.alpha:
            check_priority_params(a, self.prioritized.beta)
            tree.set_alpha(a)
        return tree

    def _beta(self, beta: float | None) -> float:
        assert self.prioritized is not None
        if beta is None:
            return self.prioritized.beta
        check_priority_params(self.prioritized.alpha, beta)
        return float(beta)

    def stats(self, storage: RingStorage | None) -> dict[str, dict[str, int]]:
        """Per consumer: its counters and ``pending`` (unreceived rows still stored)."""
        return {name: {**s.state_dict(), "pending": s.pending(storage)}
                for name, s in self.consumers.items()}

    def state_dict(self, storage: RingStorage | None = None) -> dict[str, Any]:
        """``consumers`` (name -> counters), ``rng`` (the generator's state) and
        ``priorities`` (name -> :meth:`ConsumerPriorities.state_dict`, its arrays aligned
        with ``storage``'s stored rows)."""
        return {"consumers": {name: s.state_dict() for name, s in self.consumers.items()},
                "rng": self.rng.bit_generator.state,
                "priorities": {name: t.state_dict(storage)
                               for name, t in self.priorities.items()}}

    def load_state_dict(self, state: Mapping[str, Any], capacity: int = 0,
                        counter: int = 0) -> None:
        """Load :meth:`state_dict` into a sampler of a ring of ``capacity`` rows whose
        newest row is ``counter - 1``."""
        consumers = {str(name): ConsumerState.from_state(c)
                     for name, c in state["consumers"].items()}
        priorities = {str(name): ConsumerPriorities.from_state(capacity, p, counter)
                      for name, p in state.get("priorities", {}).items()}
        if self.prioritized is None:  # prioritised replay switched off: nothing to keep
            priorities = {}
        self.rng.bit_generator.state = state["rng"]
        self.consumers, self.priorities = consumers, priorities


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
        self.min_size_to_sample = max(1, int(min_size_to_sample))
        offset = self.samples_per_insert * self.min_size_to_sample
        self.min_diff = offset - float(error_buffer)
        self.max_diff = offset + float(error_buffer)
        self.inserts = 0
        self.samples = 0

    def record_insert(self, rows: int) -> None:
        self.inserts += rows

    def record_sample(self, rows: int) -> None:
        self.samples += rows

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

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        inserts, samples = int(state["inserts"]), int(state["samples"])
        self.inserts, self.samples = inserts, samples
