"""``ReplayBufferActor``: the shared :class:`MultiAgentReplayBuffer` as a Ray actor.

The actor holds one core buffer: ``add`` stores a chunk unless the rate limiter refuses it,
``sample`` registers each reader's spec, applies the priorities it sends back and reads its
batches. Everything it sends or receives is plain data (numpy arrays in dicts and
NamedTuples). Every call carries many rows: ``add`` a whole vectorised chunk, ``sample``
whole batches for one or more consumers. Calls run one at a time in the actor, so the buffer
needs no locks.

    buffer = make_buffer_actor(buffer_kwargs)
    ray.get(buffer.add.remote(TransitionChunk(data, member=3)))
    request = SampleRequest("learner-3", 1024, 4, ReadSpec.mixin(0.5))
    [batches] = ray.get(buffer.sample.remote([request]))  # up to 4 SampleBatch
    packed = ray.get(buffer.sample_joined.remote([request]))  # unpack_joined(packed)

Each request carries its consumer's :class:`~distmarl.types.ReadSpec`, registered when it
differs from the one the consumer has (a mutation changed it, or a restarted buffer forgot
it). Replaying learners read with ``sample_joined``: every request's batches gathered in one
set of arrays, update by update (:class:`~distmarl.types.JoinedSample`), sent as one ``bytes``
object (:mod:`distmarl.buffers.wire`), which Ray sends at a fraction of the cost of many
arrays; a learner's stack then takes one update's batches of all its members as adjacent rows,
without copying them together.

A learner that paces its reads (:class:`~distmarl.types.Pace`) is granted at most the updates
its member's stored env steps earned (:class:`~distmarl.buffers.grants.UpdateGrants`), and a
member's chunk waits while its learner owes too many: the update-to-data rule lives here, with
the data.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import ray

from distmarl import tree
from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.grants import UpdateGrants
from distmarl.buffers.wire import pack_joined
from distmarl.config.replay import EVERY_STEP
from distmarl.runtime.logic.time_spent import CALL, Ledger, TimeSpent
from distmarl.types import JoinedSample, SampleBatch, SampleRequest, TransitionChunk


class AddResult(NamedTuple):
    """What an ``add`` did: ``accepted`` False means the rate limiter refused the chunk and
    nothing was stored (the writer should retry later); ``counter`` is rows ever added."""

    accepted: bool
    rows: int
    counter: int


class BufferShell:
    """The plain class behind :data:`ReplayBufferActor` (the in-process fleet holds one
    without an actor): ``MultiAgentReplayBuffer(**buffer_kwargs)``, and the members' updates
    earned by their stored env steps (``grants``; default: every step counts, writers never
    wait), which cap the reads of learners that pace theirs."""

    def __init__(self, buffer_kwargs: dict[str, Any], grants: UpdateGrants | None = None
                 ) -> None:
        self.buffer = MultiAgentReplayBuffer(**buffer_kwargs)
        self.grants = UpdateGrants(EVERY_STEP) if grants is None else grants
        self.refused_chunks = 0
        self._incarnation = uuid.uuid4().hex  # changes when Ray restarts the actor
        #: seconds spent answering calls (where the run's time goes)
        self.ledger = Ledger("buffer")

    def add(self, chunk: TransitionChunk) -> AddResult:
        """Store a chunk of rows unless writers are to wait: the rate limiter
        (``samples_per_insert``) asks for it, or the member's learner owes too many updates
        (:meth:`UpdateGrants.may_insert`)."""
        with self.ledger.spend(CALL):
            n = chunk_rows(chunk)
            member = chunk.member
            if not self._room(member, n):
                self.refused_chunks += 1
                return AddResult(False, 0, self.buffer.counter)
            rows = self.buffer.add(chunk.data, member=member)
            if member is not None:
                self.grants.inserted(member, chunk.env_steps, self.buffer.counter)
            return AddResult(True, rows, self.buffer.counter)

    def room(self, member: int | None, rows: int) -> bool:
        """Whether :meth:`add` would store a chunk of ``rows`` rows of ``member`` now."""
        with self.ledger.spend(CALL):
            return self._room(member, rows)

    def _room(self, member: int | None, rows: int) -> bool:
        return self.buffer.can_insert(rows) and (member is None
                                                 or self.grants.may_insert(member))

    def sample(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        """Each request's batches, in order (a learner hosting several members reads every
        member's in one call): its spec registered, its ``priorities`` (the TD errors of the
        consumer's last batches) applied, then up to ``num_batches`` batches (stopping at the
        first that comes back empty)."""
        with self.ledger.spend(CALL):
            return [self._read(r) for r in requests]

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        """Each request's batches as :meth:`sample` reads them, gathered in one set of arrays
        update by update (:meth:`MultiAgentReplayBuffer.read_many`)."""
        with self.ledger.spend(CALL):
            return self._joined(requests)

    def sample_joined_packed(self, requests: Sequence[SampleRequest]) -> bytes:
        """:meth:`sample_joined` as one bytes object (``unpack_joined``)."""
        with self.ledger.spend(CALL):
            return pack_joined(self._joined(requests))

    def _joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        for r in requests:
            self._registered(r)
        joined = self.buffer.read_many([(r.consumer, r.batch_size, self._allowed(r))
                                        for r in requests])
        for r, batches in zip(requests, zip(*joined.rows, strict=False), strict=False):
            if r.pace is not None:
                self.grants.grant(r.pace.member, sum(1 for n in batches if n))
        return joined

    def _allowed(self, request: SampleRequest) -> int:
        """The batches ``request`` may read: those asked, at most what its member's data
        earned (a paced learner's)."""
        if request.pace is None:
            return request.num_batches
        return min(request.num_batches, self.grants.owed(request.pace))

    def _registered(self, request: SampleRequest) -> None:
        """The request's spec registered and its priorities applied (before it reads)."""
        self.buffer.register(request.consumer, request.spec)
        if request.priorities is not None:
            self.buffer.update_priorities(request.consumer, request.priorities.indices,
                                          request.priorities.td_errors)

    def _read(self, request: SampleRequest) -> list[SampleBatch]:
        buffer, consumer = self.buffer, request.consumer
        self._registered(request)
        out = []
        for _ in range(self._allowed(request)):
            batch = buffer.read(request.batch_size, consumer)
            if batch is None:
                break
            out.append(batch)
        if request.pace is not None:
            self.grants.grant(request.pace.member, len(out))
        return out

    def stats(self) -> dict[str, Any]:
        return {**self.buffer.stats(), "refused_chunks": self.refused_chunks}

    def state_dict(self) -> dict[str, Any]:
        """The buffer's state, the members' grants in its ``meta``."""
        state = self.buffer.state_dict()
        return {**state, "meta": {**state["meta"], "grants": self.grants.state_dict()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A state of :meth:`state_dict` (one without grants: every member's start afresh)."""
        meta = dict(state["meta"])
        self.grants.load_state_dict(meta.pop("grants", {}))
        self.buffer.load_state_dict({**state, "meta": meta})

    def incarnation(self) -> str:
        return self._incarnation

    def start_clock(self) -> None:
        """Training starts: count the buffer's time from now."""
        self.ledger.start()

    def time_spent(self) -> list[TimeSpent]:
        return [self.ledger.read()]


def chunk_rows(chunk: TransitionChunk) -> int:
    """Rows in ``chunk`` (the leading axis of any of its arrays)."""
    for per_agent in chunk.data.values():
        for value in per_agent.values():
            return len(tree.first_leaf(value))
    return 0


#: The Ray actor class. Options (CPUs, name, restarts) go through ``.options(...)``.
ReplayBufferActor = ray.remote(BufferShell)


def make_buffer_actor(buffer_kwargs: dict[str, Any], grants: UpdateGrants | None = None, *,
                      name: str | None = None, num_cpus: float = 1.0, max_restarts: int = 0,
                      max_task_retries: int = 0, **options: Any) -> Any:
    """Start a :data:`ReplayBufferActor` holding ``MultiAgentReplayBuffer(**buffer_kwargs)``
    and ``grants`` (``options``: more of Ray's, such as ``scheduling_strategy``)."""
    opts: dict[str, Any] = {"num_cpus": num_cpus, "max_restarts": max_restarts,
                            "max_task_retries": max_task_retries, **options}
    if name is not None:
        opts["name"] = name
    return ReplayBufferActor.options(**opts).remote(buffer_kwargs, grants)
