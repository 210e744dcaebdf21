"""The consumers of a buffer: each one's place in the stream of rows (:class:`ConsumerState`),
its registered read (:class:`~distmarl.types.ReadSpec`, drawn by a
:class:`~distmarl.buffers.readers.Reader`) and, with prioritised replay, its own priorities;
plus the samples-per-insert rate limiter.

A consumer seen for the first time starts at the oldest stored row, and reads as the buffer's
default spec says until it registers its own (again after a mutation changes it). Rows the ring
overwrote before a consumer received them count as its ``dropped``. Pure index arithmetic
over :class:`~distmarl.buffers.storage.RingStorage`'s global row indices; nothing here copies
row data.
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
from distmarl.buffers.readers import (
    MIXIN_MODES,
    NO_ROWS,
    PrioritizedReplay,
    Reader,
    Replay,
    UniformReplay,
    make_reader,
)
from distmarl.buffers.storage import RingStorage
from distmarl.types import ReadSpec


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
            return NO_ROWS
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
            mine = _member_rows(storage, start, member) if start < stop else NO_ROWS
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
    """A buffer's default ``replay_ratio`` as given (None, or in ``(0, 1)``), else ValueError
    naming it and what the value asks for: 1 or more, replay only (``replay_ratio=None``, or
    a consumer's ``ReadSpec.replay()``); 0 or less, new rows only, each once (a consumer's
    ``ReadSpec.stream()``)."""
    if replay_ratio is None or 0.0 < float(replay_ratio) < 1.0:
        return replay_ratio
    hint = ""
    if float(replay_ratio) >= 1.0:
        hint = (" (a ratio of 1 replays only: leave replay_ratio=None, the buffer's default "
                "read then replays only, or register ReadSpec.replay() for the consumer)")
    elif float(replay_ratio) <= 0.0:
        hint = (" (a ratio of 0 reads only new rows, each once: register ReadSpec.stream() "
                "for the consumer that does)")
    raise ValueError(f"replay_ratio must be None (replay only) or in (0, 1), got "
                     f"{replay_ratio}{hint}")


class Sampler:
    """The consumers' cursors, registered reads and priorities, and the replay generator.

    :param seed: seed of the generator that draws replay rows.
    :param prioritized: prioritised replay's parameters (None: uniform replay). Replay is then
        drawn from each consumer's own priorities (:mod:`distmarl.buffers.priorities`); new
        rows of a mix-in get weight 1.
    :param mixin: how mix-in reads build a batch (:data:`~distmarl.buffers.readers.MIXIN_MODES`).
    :param default: the read of a consumer that registered none.
    """

    def __init__(self, seed: int | None, prioritized: PriorityParams | None = None,
                 mixin: str = "fixed", default: ReadSpec | None = None) -> None:
        if mixin not in MIXIN_MODES:
            raise ValueError(f"mixin must be one of {list(MIXIN_MODES)}, got {mixin!r}")
        self.rng = np.random.default_rng(seed)
        self.prioritized = prioritized
        self.mixin = mixin
        self.default = ReadSpec.replay() if default is None else default
        self.consumers: dict[str, ConsumerState] = {}
        self.priorities: dict[str, ConsumerPriorities] = {}
        self.specs: dict[str, ReadSpec] = {}
        self._readers: dict[str, Reader] = {}

    def consumer(self, name: str, storage: RingStorage | None) -> ConsumerState:
        """The named consumer; a new one starts at the oldest stored row."""
        state = self.consumers.get(name)
        if state is None:
            oldest = 0 if storage is None else storage.oldest
            state = self.consumers[name] = ConsumerState(cursor=oldest)
        return state

    def register(self, consumer: str, spec: ReadSpec) -> None:
        """``consumer`` reads as ``spec`` says from now on (checked here: ValueError naming
        what is wrong)."""
        if self.specs.get(consumer) == spec:
            return
        self._replay(consumer, spec)
        self.specs[consumer] = spec
        self._readers.pop(consumer, None)

    def spec(self, consumer: str) -> ReadSpec:
        """How ``consumer`` reads: its registered spec, else the default."""
        return self.specs.get(consumer, self.default)

    def draw(self, storage: RingStorage, consumer: str, batch_size: int
             ) -> tuple[np.ndarray, int, np.ndarray | None]:
        """Global indices of ``consumer``'s next batch, new rows first, how many are new, and
        the rows' importance weights (None without prioritised replay)."""
        reader = self._readers.get(consumer)
        if reader is None:
            spec = self.spec(consumer)
            reader = self._readers[consumer] = make_reader(spec, self.mixin,
                                                           self._replay(consumer, spec))
        return reader.draw(self.consumer(consumer, storage), storage, batch_size, self.rng)

    def _replay(self, consumer: str, spec: ReadSpec) -> Replay:
        """How ``consumer``'s replayed rows are drawn: uniformly, or by its own priorities
        with ``spec``'s exponents (the buffer's where it has none)."""
        if self.prioritized is None:
            return UniformReplay()
        alpha = self.prioritized.alpha if spec.alpha is None else float(spec.alpha)
        beta = self.prioritized.beta if spec.beta is None else float(spec.beta)
        check_priority_params(alpha, beta)
        return PrioritizedReplay(lambda storage: self._tree(consumer, storage, spec.member,
                                                            alpha), beta)

    def update_priorities(self, storage: RingStorage, consumer: str, indices: np.ndarray,
                          td_errors: np.ndarray) -> int:
        """``consumer``'s priorities of the rows at ``indices`` from their TD errors; rows
        overwritten since they were sampled are left out. Returns rows updated."""
        if self.prioritized is None:
            raise ValueError("update_priorities needs a prioritized buffer "
                             "(replay.prioritized_replay is off)")
        tree = self.priorities.get(consumer)
        if tree is None:
            raise ValueError(f"consumer {consumer!r} has sampled nothing: no priorities to update")
        return tree.update(storage, indices, td_errors, self.prioritized.eps)

    def _tree(self, consumer: str, storage: RingStorage, member: int | None,
              alpha: float) -> ConsumerPriorities:
        tree = self.priorities.get(consumer)
        if tree is None:
            tree = self.priorities[consumer] = ConsumerPriorities(storage.capacity, alpha, member)
        elif tree.member != member:
            raise ValueError(f"consumer {consumer!r} sampled member {tree.member}'s rows "
                             f"before; it cannot sample member {member}'s")
        tree.set_alpha(alpha)
        return tree

    def stats(self, storage: RingStorage | None) -> dict[str, dict[str, int]]:
        """Per consumer: its counters and ``pending`` (unreceived rows still stored)."""
        return {name: {**s.state_dict(), "pending": s.pending(storage)}
                for name, s in self.consumers.items()}

    def state_dict(self, storage: RingStorage | None = None) -> dict[str, Any]:
        """``consumers`` (name -> counters), ``rng`` (the generator's state), ``readers``
        (name -> its registered spec) and ``priorities`` (name ->
        :meth:`ConsumerPriorities.state_dict`, its arrays aligned with ``storage``'s stored
        rows)."""
        return {"consumers": {name: s.state_dict() for name, s in self.consumers.items()},
                "rng": self.rng.bit_generator.state,
                "readers": {name: spec.to_json() for name, spec in self.specs.items()},
                "priorities": {name: t.state_dict(storage)
                               for name, t in self.priorities.items()}}

    def load_state_dict(self, state: Mapping[str, Any], capacity: int = 0,
                        counter: int = 0) -> None:
        """Load :meth:`state_dict` into a sampler of a ring of ``capacity`` rows whose
        newest row is ``counter - 1`` (a state written before reads were registered has no
        ``readers``: its consumers register again)."""
        consumers = {str(name): ConsumerState.from_state(c)
                     for name, c in state["consumers"].items()}
        priorities = {str(name): ConsumerPriorities.from_state(capacity, p, counter)
                      for name, p in state.get("priorities", {}).items()}
        if self.prioritized is None:  # prioritised replay switched off: nothing to keep
            priorities = {}
        specs = {str(name): ReadSpec(**spec) for name, spec in state.get("readers", {}).items()}
        self.rng.bit_generator.state = state["rng"]
        self.consumers, self.priorities, self.specs = consumers, priorities, specs
        self._readers = {}


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
