"""``ReplayBufferActor``: the shared :class:`MultiAgentReplayBuffer` as a Ray actor.

The actor holds one core buffer and forwards calls; everything it sends or receives is plain
data (numpy arrays in dicts and NamedTuples). Every call carries many rows: ``add`` a whole
vectorised chunk, ``sample`` a whole batch. Calls run one at a time in the actor, so the buffer
needs no locks.

    buffer = make_buffer_actor(BufferSpec(...))
    ray.get(buffer.add.remote(TransitionChunk(data, member=3)))
    batch = ray.get(buffer.sample.remote(1024, "learner-3"))  # SampleBatch | None
    batches = unpack_batches(ray.get(buffer.sample_many_packed.remote(1024, "learner-3", 4)))

The ``*_packed`` methods return the batches as one ``bytes`` object
(:mod:`distmarl.buffers.wire`): Ray sends it at a fraction of the cost of a dozen arrays, so
learners use them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import ray

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.replay import BUFFER_RATIO, BufferRatio
from distmarl.buffers.wire import pack_batches
from distmarl.types import PriorityUpdate, SampleBatch, SampleRequest, TransitionChunk


class AddResult(NamedTuple):
    """What an ``add`` did: ``accepted`` False means the rate limiter refused the chunk and
    nothing was stored (the writer should retry later); ``counter`` is rows ever added."""

    accepted: bool
    rows: int
    counter: int


class BufferShell:
    """The plain class behind :data:`ReplayBufferActor` (usable without Ray in tests)."""

    def __init__(self, buffer_kwargs: dict[str, Any]) -> None:
        self.buffer = MultiAgentReplayBuffer(**buffer_kwargs)
        self.refused_chunks = 0
        self._incarnation = uuid.uuid4().hex  # changes when Ray restarts the actor

    def add(self, chunk: TransitionChunk) -> AddResult:
        """Store a chunk of rows unless the rate limiter asks writers to wait."""
        n = _chunk_rows(chunk)
        if not self.buffer.can_insert(n):
            self.refused_chunks += 1
            return AddResult(False, 0, self.buffer.counter)
        rows = self.buffer.add(chunk.data, member=chunk.member)
        return AddResult(True, rows, self.buffer.counter)

    def sample(self, batch_size: int, consumer: str = "default", member: int | None = None,
               replay_ratio: float | BufferRatio | None = BUFFER_RATIO) -> SampleBatch | None:
        """One batch (see :meth:`MultiAgentReplayBuffer.sample_numpy`), or None."""
        return self.buffer.sample_numpy(batch_size, consumer, member, replay_ratio)

    def sample_many(self, batch_size: int, consumer: str, num_batches: int,
                    member: int | None = None,
                    replay_ratio: float | BufferRatio | None = BUFFER_RATIO,
                    alpha: float | None = None, beta: float | None = None,
                    priorities: PriorityUpdate | None = None) -> list[SampleBatch]:
        """Up to ``num_batches`` batches in one call (stops at the first None): a learner that
        does several updates per step pays Ray's per-call cost once. With prioritised replay,
        ``priorities`` (the consumer's TD errors of its last call's batches) are applied
        first, so a learner's priority updates ride on its next sample call."""
        if priorities is not None:
            self.buffer.update_priorities(consumer, priorities.indices, priorities.td_errors)
        out = []
        for _ in range(num_batches):
            batch = self.buffer.sample_numpy(batch_size, consumer, member, replay_ratio,
                                             alpha, beta)
            if batch is None:
                break
            out.append(batch)
        return out

    def sample_packed(self, batch_size: int, consumer: str = "default",
                      member: int | None = None,
                      replay_ratio: float | BufferRatio | None = BUFFER_RATIO) -> bytes:
        """:meth:`sample` as one bytes object (``unpack_batches`` gives a list of 0 or 1
        batches): Ray sends one byte string far cheaper than a dozen arrays."""
        return self.sample_many_packed(batch_size, consumer, 1, member, replay_ratio)

    def sample_many_packed(self, batch_size: int, consumer: str, num_batches: int,
                           member: int | None = None,
                           replay_ratio: float | BufferRatio | None = BUFFER_RATIO,
                           alpha: float | None = None, beta: float | None = None,
                           priorities: PriorityUpdate | None = None) -> bytes:
        """:meth:`sample_many` as one bytes object (read it with ``unpack_batches``)."""
        return pack_batches(self.sample_many(batch_size, consumer, num_batches, member,
                                             replay_ratio, alpha, beta, priorities))

    def sample_requests(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        """Each request's :meth:`sample_many`, in order: a learner hosting several members
        draws every member's own batches in one call."""
        return [self.sample_many(r.batch_size, r.consumer, r.num_batches, None, r.replay_ratio,
                                 r.alpha, r.beta, r.priorities) for r in requests]

    def sample_requests_packed(self, requests: Sequence[SampleRequest]) -> list[bytes]:
        """:meth:`sample_requests`, each request's batches as one bytes object."""
        return [pack_batches(batches) for batches in self.sample_requests(requests)]

    def update_priorities(self, consumer: str, update: PriorityUpdate) -> int:
        """``consumer``'s priorities from TD errors (see
        :meth:`MultiAgentReplayBuffer.update_priorities`); rows updated."""
        return self.buffer.update_priorities(consumer, update.indices, update.td_errors)

    def stats(self) -> dict[str, Any]:
        return {**self.buffer.stats(), "refused_chunks": self.refused_chunks}

    def save(self, path: str) -> str:
        return str(self.buffer.save(Path(path)))

    def load(self, path: str) -> dict[str, Any]:
        """Replace the contents with a saved buffer file; a bad file changes nothing."""
        loaded = MultiAgentReplayBuffer.load(Path(path), device=self.buffer.device)
        self.buffer = loaded
        return self.stats()

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer.load_state_dict(state)

    def incarnation(self) -> str:
        return self._incarnation

    def pid(self) -> int:
        return os.getpid()


def _chunk_rows(chunk: TransitionChunk) -> int:
    for per_agent in chunk.data.values():
        for value in per_agent.values():
            while isinstance(value, dict | tuple):
                value = next(iter(value.values())) if isinstance(value, dict) else value[0]
            return len(value)
    return 0


#: The Ray actor class. Options (CPUs, name, restarts) go through ``.options(...)``.
ReplayBufferActor = ray.remote(BufferShell)


def make_buffer_actor(buffer_kwargs: dict[str, Any], *, name: str | None = None,
                      num_cpus: float = 1.0, max_restarts: int = 0,
                      max_task_retries: int = 0) -> Any:
    """Start a :data:`ReplayBufferActor` holding ``MultiAgentReplayBuffer(**buffer_kwargs)``."""
    opts: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": max_restarts,
                            "max_task_retries": max_task_retries}
    if name is not None:
        opts["name"] = name
    return ReplayBufferActor.options(**opts).remote(buffer_kwargs)
