"""How a learner group reads its members' replay batches: when each round comes
(:class:`ReadNow`), or one round ahead (:class:`ReadAhead`).

Reading ahead, after each round the group asks the buffer, in one call, for every member's
batches of its next round (as many as it asks a round for, less those it still holds): under
Ray the buffer samples and the answer travels while the group updates, and the next round
starts with its batches at hand. Whatever the buffer granted is what the round learns; a
member granted nothing learns nothing that round. Only a round with no read on its way (the
first, or after a member's reads changed) reads when it comes.
In one process nothing runs meanwhile, so the in-process fleet reads when each round comes: its
runs then draw in the same order whichever members share a learner.

The read carries each member's TD errors of the round just learned (prioritised replay), so
priorities go back as promptly as when reading at the round. A member whose reads changed
since (a copy, a mutation or new hyperparameters move its :attr:`LearnerShell.read_epoch`)
does not learn what was read for it before: its part of the read on its way is dropped when
it arrives, and batches it holds from before are dropped when it next reads; the other members
keep theirs. After a read that failed (the buffer restarting), :meth:`ReadAhead.forget` drops
the read on its way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from distmarl import tree
from distmarl.runtime.actors.clients import Later
from distmarl.runtime.actors.learner import LearnerShell, Readout, read_replay, replay_readouts


class Reads(Protocol):
    def read(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
        """Up to ``updates[k]`` batches of each member ``shells[k]``."""

    def send(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> None:
        """A round that asked ``updates[k]`` batches of each member ``shells[k]`` ended."""

    def forget(self) -> None:
        """Drop the read on its way (it failed)."""


class ReadNow:
    """Every member's batches read in one buffer call when a call comes."""

    def read(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
        return read_replay(shells, updates)

    def send(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> None:
        pass

    def forget(self) -> None:
        pass


class ReadAhead:
    """Each member's batches read and not learned yet, and the read on its way."""

    def __init__(self) -> None:
        #: member -> (its read epoch when they were read, the batches)
        self._held: dict[int, tuple[int, Readout]] = {}
        #: the read on its way, and whom it is for (with their read epochs when it was sent)
        self._pending: tuple[Later, list[tuple[LearnerShell, int]]] | None = None

    def read(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
        """Up to ``updates[k]`` batches of each member ``shells[k]``: those it holds (the read
        on its way arrived first); with no read on its way, the rest from one buffer call."""
        ahead = self._arrive()
        taken = [self._take(s, n) for s, n in zip(shells, updates, strict=True)]
        short = [(k, n - len(t.data)) for k, (t, n) in enumerate(zip(taken, updates,
                                                                        strict=True))
                 if n > len(t.data)]
        if short and not ahead:
            fresh = read_replay([shells[k] for k, _ in short], [n for _, n in short])
            for (k, _), read in zip(short, fresh, strict=True):
                taken[k] = _joined(taken[k], read)
        return taken

    def send(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> None:
        """Each member's next read (``updates[k]`` batches, less those it holds) on its way."""
        wanted = [(s, n - self._count(s)) for s, n in zip(shells, updates, strict=True)]
        wanted = [(s, n) for s, n in wanted if n > 0]
        if not wanted:
            return
        requests = [s.sample_request(n) for s, n in wanted]
        self._pending = (shells[0].buffer.sample_joined_later(requests),
                         [(s, s.read_epoch) for s, _ in wanted])

    def forget(self) -> None:
        self._pending = None

    def _arrive(self) -> bool:
        """The read on its way, held by its members (a member that changed since gets none);
        False when there was none."""
        if self._pending is None:
            return False
        later, sent = self._pending
        self._pending = None
        reads = replay_readouts(later.result(), sent[0][0].fields, sent[0][0].device)
        for (s, epoch), read in zip(sent, reads, strict=True):
            if s.read_epoch != epoch:
                continue
            held = self._held.get(s.member)
            before = held[1] if held is not None and held[0] == epoch else Readout([], None)
            self._held[s.member] = (epoch, _joined(before, read))
        return True

    def _count(self, shell: LearnerShell) -> int:
        held = self._held.get(shell.member)
        return len(held[1].data) if held is not None and held[0] == shell.read_epoch else 0

    def _take(self, shell: LearnerShell, n: int) -> Readout:
        """Up to ``n`` of the batches ``shell`` holds (none from an older read epoch)."""
        held = self._held.pop(shell.member, None)
        if held is None or held[0] != shell.read_epoch:
            return Readout([], None)
        now, rest = _split(held[1], n)
        if rest.data:
            self._held[shell.member] = (held[0], rest)
        return now


def _rows(batch: Any) -> int:
    return int(tree.first_leaf(batch).shape[0])


def _split(read: Readout, n: int) -> tuple[Readout, Readout]:
    """The first ``n`` batches of ``read`` and the rest."""
    if n >= len(read.data):
        return read, Readout([], None)
    cut = sum(_rows(b) for b in read.data[:n])
    indices = read.indices
    w = read.weights
    return (Readout(read.data[:n], None if w is None else w[:n],
                    None if indices is None else indices[:cut]),
            Readout(read.data[n:], None if w is None else w[n:],
                    None if indices is None else indices[cut:]))


def _joined(first: Readout, then: Readout) -> Readout:
    """``first``'s batches, then ``then``'s."""
    if not first.data:
        return then
    if not then.data:
        return first
    weights = None if first.weights is None or then.weights is None \
        else first.weights + then.weights
    parts = [x for x in (first.indices, then.indices) if x is not None]
    return Readout(first.data + then.data, weights, np.concatenate(parts) if parts else None)
