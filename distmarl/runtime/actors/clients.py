"""What the shells reach outside themselves through: the object store and the replay buffer.

A learner publishes its weights as a box (``[ref]``) and a worker opens one; both read from and
write to the buffer. Under Ray the box holds an object-store ref and the buffer is another
actor; in one process (:class:`~distmarl.runtime.fleets.local_fleet.LocalFleet`) the box holds the
weights themselves and the buffer is a plain object. The shells take one :class:`Store` and one
buffer client and never ask which they got.

Only plain data crosses: a local store copies what it keeps, so a member's published weights
never change under a worker that holds them (as an object-store copy would not).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import ray

from distmarl.buffers.wire import unpack_joined
from distmarl.types import JoinedSample, SampleBatch, SampleRequest, TransitionChunk

__all__ = ["BufferClient", "Later", "LocalBuffer", "LocalStore", "RayStore", "RemoteBuffer",
           "Store"]


class Store(Protocol):
    """Where published weights and snapshots live: ``get(put(x))`` equals ``x`` and never
    changes afterwards."""

    def put(self, value: Any) -> Any:
        """A reference to a copy of ``value``."""

    def get(self, ref: Any) -> Any:
        """What ``ref`` refers to (a value that is not a reference is returned as it is)."""


class RayStore:
    """Ray's object store (the value is serialised once; refs cross processes)."""

    def put(self, value: Any) -> Any:
        return ray.put(value)

    def get(self, ref: Any) -> Any:
        return ray.get(ref) if isinstance(ref, ray.ObjectRef) else ref


class LocalStore:
    """This process's memory: ``put`` keeps a deep copy, ``get`` hands it back (callers only
    read it, as they would an object-store value)."""

    def put(self, value: Any) -> Any:
        return copy.deepcopy(value)

    def get(self, ref: Any) -> Any:
        return ref


class Later(Protocol):
    """A buffer read whose answer is taken later (or never)."""

    def result(self) -> JoinedSample:
        """The answer (waiting for it where it is still on its way)."""


class BufferClient(Protocol):
    """The calls a learner and a rollout worker make on the replay buffer
    (:class:`~distmarl.runtime.actors.buffer.BufferShell`'s)."""

    def add(self, chunk: TransitionChunk) -> Any:
        """Store ``chunk``; an ``AddResult`` (``accepted`` False: retry later)."""

    def room(self, member: int | None, rows: int) -> bool:
        """Whether a chunk of ``rows`` rows of ``member`` would be stored now (a writer asks
        this, and sends its chunk again only once it would)."""

    def sample(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        """Each request's batches (up to its ``num_batches``), in one buffer call."""

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        """Each request's batches in one set of arrays, update by update, in one buffer
        call."""

    def sample_joined_later(self, requests: Sequence[SampleRequest]) -> Later:
        """:meth:`sample_joined` whose answer is taken later: under Ray the call is sent now
        and answered while the caller works; in one process it runs when the answer is
        taken (where a read at that moment would run)."""

    def sample_then_stats(self, requests: Sequence[SampleRequest]
                          ) -> tuple[list[list[SampleBatch]], dict[str, Any]]:
        """:meth:`sample`, and the buffer's sizes and consumers' counters right after it (what
        a fragment reader checks its rows against), in one round trip."""


class RemoteBuffer:
    """A buffer actor's handle as a :class:`BufferClient` (each call waits for its answer).

    Given the actor's ``name``, it pickles as that name and looks the actor up again where
    it is unpickled: the learners and workers it is handed to at construction then hold no
    actor handle among their constructor arguments, which Ray cannot restart them from
    reliably (and warns of at every start)."""

    def __init__(self, handle: Any, name: str | None = None) -> None:
        self.handle, self.name = handle, name

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.name is None:
            return RemoteBuffer, (self.handle,)
        return RemoteBuffer.named, (self.name,)

    @staticmethod
    def named(name: str) -> RemoteBuffer:
        """The client of the buffer actor called ``name`` (in this job's namespace)."""
        return RemoteBuffer(ray.get_actor(name), name)

    def add(self, chunk: TransitionChunk) -> Any:
        return ray.get(self.handle.add.remote(chunk))

    def room(self, member: int | None, rows: int) -> bool:
        return bool(ray.get(self.handle.room.remote(member, rows)))

    def sample(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        """A stream's fragments cross unpacked: Ray hands their arrays over out of band (one
        copy, in the object store), where packing them into one bytes object would copy them
        twice."""
        return list(ray.get(self.handle.sample.remote(list(requests))))

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        """Replayed batches cross packed: Ray sends one byte string far cheaper than many
        arrays."""
        return self.sample_joined_later(requests).result()

    def sample_joined_later(self, requests: Sequence[SampleRequest]) -> Later:
        return _Sent(self.handle.sample_joined_packed.remote(list(requests)))

    def sample_then_stats(self, requests: Sequence[SampleRequest]
                          ) -> tuple[list[list[SampleBatch]], dict[str, Any]]:
        # both calls sent before either is awaited: an actor runs one caller's calls in order
        sent = self.handle.sample.remote(list(requests))
        stats = self.handle.stats.remote()
        return list(ray.get(sent)), dict(ray.get(stats))


class LocalBuffer:
    """A :class:`~distmarl.runtime.actors.buffer.BufferShell` in this process as a
    :class:`BufferClient`. Sampled arrays are the buffer's own copies (fancy indexing), so
    nothing is copied again."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def add(self, chunk: TransitionChunk) -> Any:
        return self.shell.add(chunk)

    def room(self, member: int | None, rows: int) -> bool:
        return bool(self.shell.room(member, rows))

    def sample(self, requests: Sequence[SampleRequest]) -> list[list[SampleBatch]]:
        return self.shell.sample(requests)

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        return self.shell.sample_joined(requests)

    def sample_joined_later(self, requests: Sequence[SampleRequest]) -> Later:
        return _Deferred(lambda: self.sample_joined(requests))

    def sample_then_stats(self, requests: Sequence[SampleRequest]
                          ) -> tuple[list[list[SampleBatch]], dict[str, Any]]:
        return self.shell.sample(requests), dict(self.shell.stats())


class _Sent:
    """A Ray call's answer, unpacked when taken."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self) -> JoinedSample:
        return unpack_joined(ray.get(self.ref))


class _Deferred:
    """A call made when its answer is taken."""

    def __init__(self, call: Callable[[], JoinedSample]) -> None:
        self.call = call

    def result(self) -> JoinedSample:
        return self.call()
