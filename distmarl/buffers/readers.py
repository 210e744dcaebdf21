"""How a consumer's batch is drawn, as it registered its :class:`~distmarl.types.ReadSpec`:
which new rows it takes (:class:`Stream`, :class:`FixedMixIn`, :class:`RllibMixIn`, or none)
and how the rest is replayed (:class:`UniformReplay`, or :class:`PrioritizedReplay` by the
consumer's own TD errors). A :class:`Reader` joins the two; the
:class:`~distmarl.buffers.sampling.Sampler` builds one per consumer when it registers and
keeps the consumers' cursors, trees and the replay generator.

What each draws (``batch_size`` rows asked for, ``r`` the replayed share):

- stream: only rows the consumer has not received, each once and oldest first; fewer rows
  when fewer are new, nothing replayed.
- fixed mix-in: the *newest* ``round(batch_size * (1 - r))`` unreceived rows, the rest replay
  (a row added just before a read comes back in it). Older unreceived rows are passed over:
  never returned as new, still reachable by replay, counted in the consumer's ``skipped``.
- RLlib's mix-in (``MultiAgentMixInReplayBuffer``): the *oldest* unreceived rows up to
  ``batch_size * (1 - r)`` rounded up or down at random to that mean (the rest stay queued),
  replay in the ratio (``batch_size`` minus the new share when that is full, else
  ``n_new * r / (1 - r)`` rounded at random); nothing at all when no row is new.
- replay: every row replayed.

Pure index arithmetic over :class:`~distmarl.buffers.storage.RingStorage`'s global row
indices; nothing here copies row data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from distmarl.buffers.priorities import ConsumerPriorities
from distmarl.buffers.storage import RingStorage
from distmarl.types import ReadSpec

__all__ = ["FixedMixIn", "NewRows", "NoNewRows", "PrioritizedReplay", "Reader", "Replay",
           "RllibMixIn", "Stream", "UniformReplay", "make_reader", "random_round",
           "uniform_rows"]

NO_ROWS = np.empty(0, dtype=np.int64)
#: how a mix-in read builds a batch (see the module docstring)
MIXIN_MODES = ("fixed", "rllib")


class Cursor(Protocol):
    """A consumer's place in the stream of rows (:class:`~distmarl.buffers.sampling.ConsumerState`)."""

    def stream(self, storage: RingStorage, limit: int, member: int | None) -> np.ndarray: ...

    def mix_in(self, storage: RingStorage, limit: int, member: int | None) -> np.ndarray: ...


class NewRows(Protocol):
    def take(self, cursor: Cursor, storage: RingStorage, batch_size: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, int] | None:
        """The new rows of a batch and how many replayed rows go with them; None: return
        nothing this time."""


class Replay(Protocol):
    def draw(self, storage: RingStorage, count: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """``count`` replayed rows and their importance weights (None: uniform replay)."""


class NoNewRows:
    """Replay only."""

    def take(self, cursor: Cursor, storage: RingStorage, batch_size: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, int] | None:
        return NO_ROWS, batch_size


class Stream:
    """Unreceived rows only, each once, oldest first."""

    def take(self, cursor: Cursor, storage: RingStorage, batch_size: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, int] | None:
        return cursor.stream(storage, batch_size, member), 0


class FixedMixIn:
    """The newest unreceived rows, ``round(batch_size * (1 - replay_ratio))`` of them."""

    def __init__(self, replay_ratio: float) -> None:
        self.replay_ratio = replay_ratio

    def take(self, cursor: Cursor, storage: RingStorage, batch_size: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, int] | None:
        new = cursor.mix_in(storage, round(batch_size * (1.0 - self.replay_ratio)), member)
        return new, batch_size - len(new)


class RllibMixIn:
    """RLlib's mix-in: the oldest unreceived rows up to a randomly rounded share."""

    def __init__(self, replay_ratio: float) -> None:
        self.replay_ratio = replay_ratio

    def take(self, cursor: Cursor, storage: RingStorage, batch_size: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, int] | None:
        r = self.replay_ratio
        share = batch_size * (1.0 - r)
        max_new = random_round(share, rng)
        new = cursor.stream(storage, max_new, member)
        if np.isclose(len(new), share):
            num_replay = batch_size - max_new
        else:
            num_replay = min(batch_size - max_new, random_round(len(new) * r / (1.0 - r), rng))
        return (new, num_replay) if len(new) else None


class UniformReplay:
    """Rows drawn uniformly, with replacement."""

    def draw(self, storage: RingStorage, count: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        return uniform_rows(storage, count, rng, member), None


class PrioritizedReplay:
    """Rows drawn by the consumer's own priorities (``tree()``: its tree, made on first
    use), importance weights with exponent ``beta``."""

    def __init__(self, tree: Callable[[RingStorage], ConsumerPriorities], beta: float) -> None:
        self.tree, self.beta = tree, beta

    def draw(self, storage: RingStorage, count: int, member: int | None,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        return self.tree(storage).draw(storage, count, self.beta, rng)


class Reader:
    """One consumer's reads: its ``new`` rows, then ``replay`` for the rest (None: nothing
    replayed), of ``member``'s rows only when given."""

    def __init__(self, spec: ReadSpec, new: NewRows, replay: Replay | None) -> None:
        self.spec, self.new, self.replay = spec, new, replay

    def draw(self, cursor: Cursor, storage: RingStorage, batch_size: int,
             rng: np.random.Generator) -> tuple[np.ndarray, int, np.ndarray | None]:
        """Global indices of one batch, new rows first, how many are new, and the rows'
        importance weights (new rows 1; None for uniform replay or none)."""
        member = self.spec.member
        taken = self.new.take(cursor, storage, batch_size, member, rng)
        if taken is None:
            return NO_ROWS, 0, None
        new, num_replay = taken
        if self.replay is None:
            return new, len(new), None
        replay, weights = self.replay.draw(storage, num_replay, member, rng)
        if weights is None:
            return (np.concatenate([new, replay]) if len(new) else replay), len(new), None
        ones = np.ones(len(new), dtype=np.float32)
        return np.concatenate([new, replay]), len(new), np.concatenate([ones, weights])


def make_reader(spec: ReadSpec, mixin: str, replay: Replay) -> Reader:
    """The reader of ``spec``: its new rows (a mix-in as the buffer's ``mixin`` says) and
    ``replay`` for the rest (a stream replays nothing)."""
    if spec.kind == "stream":
        return Reader(spec, Stream(), None)
    if spec.kind == "replay":
        return Reader(spec, NoNewRows(), replay)
    assert spec.replay_ratio is not None
    new = RllibMixIn(spec.replay_ratio) if mixin == "rllib" else FixedMixIn(spec.replay_ratio)
    return Reader(spec, new, replay)


def random_round(value: float, rng: np.random.Generator) -> int:
    """``value`` rounded up with probability ``value % 1``, else down: an integer whose mean
    is ``value`` (RLlib's ``round_up_or_down``)."""
    low = int(np.floor(value))
    return low + int(rng.random() < value - low)


def uniform_rows(storage: RingStorage, count: int, rng: np.random.Generator,
                 member: int | None) -> np.ndarray:
    """``count`` stored rows drawn uniformly with replacement (only ``member``'s when given)."""
    if count <= 0 or storage.size == 0:
        return NO_ROWS
    if member is None:
        return storage.oldest + rng.integers(0, storage.size, size=count, dtype=np.int64)
    stored = storage.stored_indices()
    mine = stored[storage.members_of(stored) == member]
    if len(mine) == 0:
        return NO_ROWS
    drawn: np.ndarray = mine[rng.integers(0, len(mine), size=count)]
    return drawn
