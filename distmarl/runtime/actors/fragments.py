"""An on-policy learner's data path: its own member's whole rollout fragments, each used once.

A rollout worker of an on-policy member (IPPO, MAPPO) writes each fragment -- ``learn_step``
vectorised steps of its ``num_envs`` sub-envs, ``rows = learn_step * num_envs`` transitions per
agent, time-major (row ``t * num_envs + e``), with the behaviour policy's ``log_prob`` and
``value`` -- in one buffer ``add`` tagged with the member, so a fragment is one block of
consecutive global row indices. :class:`FragmentReader` streams the member's rows that its
consumer has not received yet, oldest first (``ReadSpec.stream(member)``): each read of ``rows``
rows is one whole fragment, returned once, and never to another member's learner.

Everything a fragment's advantages need is in its rows: ``next_value`` is the behaviour value
network's estimate of the true next observation (the final one at a truncation), from which
the learner bootstraps truncations and the fragment's last step.

Guards (only faults trip them; any trip drops the rows just read and then every row of the
member still waiting, which realigns the stream: a discard ends between two ``add`` calls):

- a fragment must be ``rows`` consecutive indices, after every row already used (a buffer
  restored from an older snapshot would otherwise hand out used rows again). A sanity check
  for sizes: the runtime never writes a fragment of another size for a learner, since a
  ``learn_step`` changes only with a mutation or copy, which discards the waiting fragments;
  a wrong-size fragment written right before another of the member would go unnoticed;
- when the consumer's ``dropped`` count moved and the first row read is the ring's oldest row,
  the ring may have overwritten the head of that fragment.

With replay shards, each shard holds whole fragments of its own: :class:`ShardedFragments`
reads each shard with a reader of its own, whose guards check that shard's indices.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import numpy as np

from distmarl.runtime.actors.clients import BufferClient
from distmarl.runtime.actors.shards import shard_clients
from distmarl.types import MemberID, ReadSpec, SampleBatch, SampleRequest

log = logging.getLogger(__name__)

#: ``batch_size`` of a discard: more rows than a member can ever have waiting.
DISCARD_ROWS = 2**40
#: fragments remembered by :meth:`FragmentReader.used` (a debugging and testing aid)
USED_LOG = 100_000


def fragment_problem(indices: np.ndarray, rows: int, next_row: int) -> str | None:
    """Why the global row ``indices`` ``(n,)`` of one read (ascending) are not one whole, unused
    fragment of ``rows`` rows; None when they are."""
    if len(indices) != rows:
        return f"{len(indices)} rows where a fragment has {rows}"
    if int(indices[-1]) - int(indices[0]) != rows - 1:
        return f"rows {int(indices[0])}..{int(indices[-1])} are not one fragment's write"
    if int(indices[0]) < next_row:
        return f"row {int(indices[0])} was already used (next unused row: {next_row})"
    return None


class FragmentReader:
    """Reads member ``member``'s fragments from the replay buffer ``buffer`` as consumer
    ``consumer``; a fragment of ``learn_step`` steps has ``learn_step * num_envs`` rows."""

    def __init__(self, buffer: BufferClient, consumer: str, member: MemberID, num_envs: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.buffer, self.consumer, self.member, self.num_envs = buffer, consumer, member, num_envs
        self.spec = ReadSpec.stream(member)
        self.next_row = 0  # every new fragment starts at or after this global row
        self.dropped = 0  # the consumer's drop count as last seen
        self.discarded_rows = 0
        self._used: deque[tuple[int, int]] = deque(maxlen=USED_LOG)

    def read(self, learn_step: int, max_fragments: int) -> list[SampleBatch]:
        """Up to ``max_fragments`` whole fragments, oldest first; each batch's ``data[field]
        [agent]`` is ``(learn_step * num_envs, *field_shape)``, time-major."""
        if learn_step < 1 or max_fragments < 1:
            raise ValueError(f"learn_step and max_fragments must be >= 1, got {learn_step}, "
                             f"{max_fragments}")
        rows = learn_step * self.num_envs
        batches, stats = self._stream(rows, max_fragments)
        problem = self._overwritten(batches, stats)
        good: list[SampleBatch] = []
        for i, batch in enumerate(batches):
            problem = problem or fragment_problem(batch.indices, rows, self.next_row)
            if problem:
                self._reject(batches[i:], problem)
                break
            self.next_row = int(batch.indices[-1]) + 1
            self._used.append((int(batch.indices[0]), self.next_row))
            good.append(batch)
        return good

    def discard_pending(self) -> int:
        """Receive and drop every row of the member not read yet (fragments collected by a
        policy the learner no longer has); returns how many rows that was."""
        batches, stats = self._stream(DISCARD_ROWS, 1)
        self.dropped = _dropped(stats, self.consumer)
        return self._drop(batches)

    def _stream(self, rows: int, num_batches: int) -> tuple[list[SampleBatch], dict[str, Any]]:
        """Up to ``num_batches`` batches of the member's unreceived rows, ``rows`` each,
        oldest first, and the buffer's stats right after."""
        sampled, stats = self.buffer.sample_then_stats(
            [SampleRequest(self.consumer, rows, num_batches, self.spec)])
        return sampled[0], stats

    def used(self) -> list[tuple[int, int]]:
        """``(first, stop)`` global row ranges of the fragments :meth:`read` returned, in order
        (the last :data:`USED_LOG`)."""
        return list(self._used)

    def _overwritten(self, batches: list[SampleBatch], stats: dict[str, Any]) -> str | None:
        dropped = _dropped(stats, self.consumer)
        moved, self.dropped = dropped != self.dropped, dropped
        oldest = int(stats["counter"]) - int(stats["size"])
        if moved and batches and int(batches[0].indices[0]) <= oldest:
            return "the ring overwrote rows before they were read"
        return None

    def _reject(self, batches: list[SampleBatch], problem: str) -> None:
        rows = self._drop(batches) + self.discard_pending()
        log.warning("learner of member %d discarded %d rows: %s", self.member, rows, problem)

    def _drop(self, batches: list[SampleBatch]) -> int:
        n = 0
        for batch in batches:
            if len(batch.indices):
                n += len(batch.indices)
                self.next_row = max(self.next_row, int(batch.indices[-1]) + 1)
        self.discarded_rows += n
        return n


class ShardedFragments:
    """A :class:`FragmentReader` per replay shard, read as one: each read takes the shards'
    fragments in turn, starting one shard further each time (no shard waits behind
    another)."""

    def __init__(self, readers: list[FragmentReader]) -> None:
        self.readers = readers
        self._start = 0

    def read(self, learn_step: int, max_fragments: int) -> list[SampleBatch]:
        """Up to ``max_fragments`` whole fragments over the shards (as
        :meth:`FragmentReader.read`)."""
        n = len(self.readers)
        out: list[SampleBatch] = []
        for k in range(n):
            if len(out) >= max_fragments:
                break
            out += self.readers[(self._start + k) % n].read(learn_step, max_fragments - len(out))
        self._start = (self._start + 1) % n
        return out

    def discard_pending(self) -> int:
        return sum(r.discard_pending() for r in self.readers)

    def used(self) -> list[tuple[int, int]]:
        """Each shard's used ranges (its own indices), shard after shard."""
        return [span for r in self.readers for span in r.used()]

    @property
    def discarded_rows(self) -> int:
        return sum(r.discarded_rows for r in self.readers)


def fragment_reader(buffer: BufferClient, consumer: str, member: MemberID, num_envs: int
                    ) -> FragmentReader | ShardedFragments:
    """``member``'s fragment reader on ``buffer``: one per shard where it is sharded."""
    readers = [FragmentReader(b, consumer, member, num_envs) for b in shard_clients(buffer)]
    return readers[0] if len(readers) == 1 else ShardedFragments(readers)


def _dropped(stats: dict[str, Any], consumer: str) -> int:
    return int(stats["consumers"].get(consumer, {}).get("dropped", 0))
