"""``ShardedBuffer``: the clients of a run's replay shards as one buffer client.

A rollout worker's client writes each chunk to the next shard in turn, from the shard of its
own (:meth:`~distmarl.buffers.shards.ShardLayout.first_shard`); a chunk a shard refuses is sent
to that shard again, once it has room. A learner's client sends each read to every shard at
once and joins their answers (:meth:`~distmarl.buffers.shards.ShardLayout.join`): under Ray the
shards sample side by side. An on-policy learner reads its fragments shard by shard
(:class:`~distmarl.runtime.actors.fragments.ShardedFragments`), each shard's rows with their
own indices, which its guards check.

With one shard a run holds that shard's own client (:func:`sharded`): nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distmarl.buffers.shards import ShardLayout, merge_stats
from distmarl.runtime.actors.clients import BufferClient, Later
from distmarl.types import JoinedSample, SampleBatch, SampleRequest, TransitionChunk

__all__ = ["ShardedBuffer", "shard_clients", "sharded"]


class ShardedBuffer:
    """``shards`` (each a :class:`~distmarl.runtime.actors.clients.BufferClient`) as one
    client; a writer's chunks go to them in turn from shard ``first``."""

    def __init__(self, shards: Sequence[BufferClient], first: int = 0) -> None:
        self.shards = list(shards)
        self.layout = ShardLayout(len(self.shards))
        self.next = first % len(self.shards)  # where the next chunk goes

    # ------------------------------------------------------------------ writing
    def add(self, chunk: TransitionChunk) -> Any:
        """Store ``chunk`` on the next shard; an accepted chunk moves the turn on."""
        result = self.shards[self.next].add(chunk)
        if result.accepted:
            self.next = (self.next + 1) % len(self.shards)
        return result

    def room(self, member: int | None, rows: int) -> bool:
        return self.shards[self.next].room(member, rows)

    # ------------------------------------------------------------------ reading
    def sample(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        return self.layout.batches([shard.sample(mine) for shard, mine in self._split(requests)])

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        return self.sample_joined_later(requests).result()

    def sample_joined_later(self, requests: Sequence[SampleRequest]) -> Later:
        """Every shard's read sent now (under Ray they sample side by side), joined when
        taken."""
        return _Joined(self.layout, [shard.sample_joined_later(mine)
                                     for shard, mine in self._split(requests)])

    def sample_then_stats(self, requests: Sequence[SampleRequest]
                          ) -> tuple[list[list[SampleBatch]], dict[str, Any]]:
        answers = [shard.sample_then_stats(mine) for shard, mine in self._split(requests)]
        return (self.layout.batches([a[0] for a in answers]),
                merge_stats([a[1] for a in answers]))

    def _split(self, requests: Sequence[SampleRequest]
               ) -> list[tuple[BufferClient, list[SampleRequest]]]:
        """Each shard with its part of ``requests`` (:meth:`ShardLayout.requests`)."""
        return list(zip(self.shards, self.layout.requests(requests), strict=True))


class _Joined:
    """Every shard's answer, joined when taken."""

    def __init__(self, layout: ShardLayout, parts: list[Later]) -> None:
        self.layout, self.parts = layout, parts

    def result(self) -> JoinedSample:
        return self.layout.join([p.result() for p in self.parts])


def sharded(shards: Sequence[BufferClient], first: int = 0) -> BufferClient:
    """The client of ``shards`` for a writer that starts at shard ``first`` (and for any
    reader): one shard's own client, or a :class:`ShardedBuffer`."""
    return shards[0] if len(shards) == 1 else ShardedBuffer(shards, first)


def shard_clients(buffer: BufferClient) -> list[BufferClient]:
    """Each shard's client behind ``buffer`` (itself where it is one buffer)."""
    return list(buffer.shards) if isinstance(buffer, ShardedBuffer) else [buffer]
