"""Replay shards: a run's buffer spread over ``shards`` buffers, as Ape-X and Reverb spread theirs.

Each rollout writer sends its chunks to the shards in turn, starting from a shard of its own
(writer ``k`` starts at shard ``k % shards``), so every shard holds about ``1 / shards`` of every
member's rows and takes about ``1 / shards`` of the writes; an on-policy fragment is one write,
whole on one shard. A learner's read goes to every shard at once: each shard grants a member's
learner the updates the member's rows there earned (its own
:class:`~distmarl.buffers.grants.UpdateGrants`, under :meth:`ShardLayout.rule`), so a learner
samples every shard in proportion to its rows; each batch comes whole from one shard, and
prioritised replay keeps each shard's sum-trees with their own totals (as Ape-X's shards do).
Each shard has its own rate limiter, mix-in cursors and state.

A row's index across shards: row ``i`` of shard ``s`` is ``i * shards + s``
(:meth:`ShardLayout.encode`), so a learner's batches and the priorities it sends back name rows
of every shard in one array, and one shard's indices are those of an unsharded buffer.

Plain data and numbers; nothing here calls a buffer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from distmarl import tree
from distmarl.config.replay import UpdateRule
from distmarl.types import JoinedSample, PriorityUpdate, SampleBatch, SampleRequest


class ShardLayout(NamedTuple):
    """How ``shards`` shards divide one buffer's rows, writes, reads and limits."""

    shards: int

    def first_shard(self, writer: int) -> int:
        """The shard writer ``writer`` (``member * workers_per_member + worker``) writes its
        first chunk to (then the next, in turn)."""
        return writer % self.shards

    # ------------------------------------------------------------------ limits per shard
    def share(self, value: int) -> int:
        """One shard's part of a whole buffer's ``value`` (rows, steps, updates), rounded up."""
        return math.ceil(value / self.shards)

    def rule(self, rule: UpdateRule) -> UpdateRule:
        """A shard's update rule: ``learning_starts`` of its own rows and ``learning_delay``
        of a member's steps it holds, each its share of the buffer's."""
        return UpdateRule(self.share(rule.learning_starts), self.share(rule.learning_delay))

    def max_owed(self, max_owed: int | None) -> int | None:
        """The updates a learner may owe a shard before the member's writers to it wait."""
        return None if max_owed is None else self.share(max_owed)

    def buffer_kwargs(self, kwargs: Mapping[str, Any], shard: int) -> dict[str, Any]:
        """Shard ``shard``'s buffer arguments: its share of ``memory_size``, a seed of its own
        (shard 0 keeps the buffer's)."""
        seed = kwargs.get("seed")
        return {**kwargs, "memory_size": self.share(int(kwargs["memory_size"])),
                "seed": None if seed is None else int(seed) + 7919 * shard}

    # ------------------------------------------------------------------ indices
    def encode(self, indices: np.ndarray, shard: int) -> np.ndarray:
        """Shard ``shard``'s row ``indices`` as indices across shards."""
        if self.shards == 1:
            return indices
        return np.asarray(indices, np.int64) * self.shards + shard

    def priorities(self, update: PriorityUpdate | None) -> list[PriorityUpdate | None]:
        """``update`` (rows across shards) split into each shard's own rows."""
        if update is None or self.shards == 1:
            return [update] * self.shards
        indices = np.asarray(update.indices, np.int64)
        shard = indices % self.shards
        out: list[PriorityUpdate | None] = []
        for s in range(self.shards):
            mine = shard == s
            out.append(PriorityUpdate(indices[mine] // self.shards,
                                      np.asarray(update.td_errors)[mine]) if mine.any() else None)
        return out

    # ------------------------------------------------------------------ reads
    def requests(self, requests: Sequence[SampleRequest]) -> list[list[SampleRequest]]:
        """Each shard's part of ``requests``: its priorities; a paced request whole (each
        shard grants what the member's rows there earned), any other its share of the
        batches."""
        if self.shards == 1:
            return [list(requests)]
        out: list[list[SampleRequest]] = [[] for _ in range(self.shards)]
        for r in requests:
            batches = r.num_batches if r.pace is not None else self.share(r.num_batches)
            for s, priorities in enumerate(self.priorities(r.priorities)):
                out[s].append(r._replace(num_batches=batches, priorities=priorities))
        return out

    def join(self, parts: Sequence[JoinedSample]) -> JoinedSample:
        """The shards' answers to one read (:meth:`requests`) as one: each shard's updates
        after the previous shard's, every request's indices encoded and in that order."""
        if self.shards == 1:
            return parts[0]
        filled = [p for p in parts if p.rows]
        indices = [np.concatenate([self.encode(p.indices[r], s) for s, p in enumerate(parts)])
                   for r in range(len(parts[0].indices))]
        if not filled:
            return parts[0]._replace(indices=indices)
        weighted = [p.weights for p in filled if p.weights is not None]
        return JoinedSample(
            tuple(tree.concat([p.data[f] for p in filled]) for f in range(len(filled[0].data))),
            [u for p in filled for u in p.rows], [u for p in filled for u in p.num_new],
            indices, np.concatenate(weighted) if weighted else None)

    def batches(self, parts: Sequence[list[list[SampleBatch]]]) -> list[list[SampleBatch]]:
        """The shards' answers to one ``sample`` call as one: each request's batches of every
        shard, shard after shard, their indices encoded."""
        if self.shards == 1:
            return parts[0]
        return [[b._replace(indices=self.encode(b.indices, s))
                 for s, part in enumerate(parts) for b in part[r]]
                for r in range(len(parts[0]))]


def merge_stats(stats: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Shards' ``stats()`` as one buffer's: sizes, counters and each consumer's counters added
    up; ``shards`` keeps each shard's own."""
    if len(stats) == 1:
        return dict(stats[0])
    summed = ("size", "counter", "capacity", "bytes", "refused_chunks")
    out: dict[str, Any] = {k: sum(int(s.get(k, 0)) for s in stats) for k in summed}
    consumers: dict[str, dict[str, Any]] = {}
    for s in stats:
        for name, counts in s.get("consumers", {}).items():
            mine = consumers.setdefault(name, {})
            for k, v in counts.items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    mine[k] = mine.get(k, 0) + v
    return {**out, "consumers": consumers, "rate_limiter": None, "shards": list(stats)}


def resolve_shards(setting: int | str, nodes: int, writers: int) -> int:
    """``buffer.shards`` as a count: ``auto`` is one shard per node, at most one per writer
    (``members * workers_per_member``)."""
    count = max(1, nodes) if setting == "auto" else int(setting)
    return max(1, min(count, writers))
