"""ReplayBufferActor on a real local Ray: many writers and readers at once, nothing lost."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from distmarl.runtime.actors.buffer import BufferShell, make_buffer_actor
from distmarl.types import ReadSpec, SampleRequest, TransitionChunk
from tests.fakes import AGENTS, FIELDS, check_aligned, rows

pytestmark = pytest.mark.ray

WRITERS, CHUNKS, CHUNK_ROWS = 3, 30, 25
READERS, BATCH, RATIO = 4, 32, 0.5


def buffer_kwargs(**kw) -> dict:
    return {"memory_size": 10_000, "field_names": FIELDS, "agent_ids": AGENTS, "seed": 0, **kw}


def request(consumer: str, rows: int, batches: int = 1, spec: ReadSpec | None = None
            ) -> list[SampleRequest]:
    """One consumer's read, as the actor's ``sample`` takes it (default: replay only)."""
    return [SampleRequest(consumer, rows, batches, spec or ReadSpec.replay())]


def _writer_cls(ray):
    @ray.remote(num_cpus=0)
    class Writer:
        def __init__(self, buffer, writer_id: int) -> None:
            self.buffer, self.writer_id = buffer, writer_id

        def run(self) -> list[int]:
            written = []
            for k in range(CHUNKS):
                ids = self.writer_id * 100_000 + k * CHUNK_ROWS + np.arange(CHUNK_ROWS)
                result = ray.get(self.buffer.add.remote(TransitionChunk(rows(ids), self.writer_id)))
                assert result.accepted and result.rows == CHUNK_ROWS
                written.extend(ids.tolist())
            return written

    return Writer


def _reader_cls(ray):
    @ray.remote(num_cpus=0)
    class Reader:
        def __init__(self, buffer, name: str) -> None:
            self.buffer, self.name = buffer, name
            self.new_ids: list[int] = []
            self.new_parts: list[list[int]] = []  # global indices of each batch's new rows
            self.sizes: list[tuple[int, int]] = []

        def read(self, calls: int) -> int:
            for _ in range(calls):
                [got] = ray.get(self.buffer.sample.remote(
                    request(self.name, BATCH, spec=ReadSpec.mixin(RATIO))))
                if not got:
                    continue
                batch = got[0]
                ids = check_aligned(batch.data)
                self.new_ids.extend(ids[: batch.num_new].tolist())
                self.new_parts.append(batch.indices[: batch.num_new].tolist())
                self.sizes.append((len(ids), batch.num_new))
            return len(self.new_ids)

        def result(self) -> tuple[list[int], list[list[int]], list[tuple[int, int]]]:
            return self.new_ids, self.new_parts, self.sizes

    return Reader


def test_many_writers_and_readers_lose_and_duplicate_nothing(ray_local) -> None:
    """Mix-in readers sampling while writers add: every row is stored once; each reader gets
    each row at most once as new, always the newest rows it has not received (a run of
    consecutive rows, later than any before), and every row is received or skipped."""
    ray = ray_local
    buffer = make_buffer_actor(buffer_kwargs(replay_ratio=RATIO), num_cpus=0)
    writers = [_writer_cls(ray).remote(buffer, w) for w in range(WRITERS)]
    readers = [_reader_cls(ray).remote(buffer, f"learner-{i}") for i in range(READERS)]
    write_refs = [w.run.remote() for w in writers]
    read_refs = [r.read.remote(40) for r in readers]  # concurrently with the writers
    written = sorted(itertools.chain.from_iterable(ray.get(write_refs)))
    ray.get(read_refs)
    total = WRITERS * CHUNKS * CHUNK_ROWS
    assert len(written) == total == len(set(written))
    for reader in readers:  # once the writers are done, the next sample gets the newest rows
        ray.get(reader.read.remote(3))
    stats = ray.get(buffer.stats.remote())
    for i, reader in enumerate(readers):
        new_ids, new_parts, sizes = ray.get(reader.result.remote())
        assert len(set(new_ids)) == len(new_ids) and set(new_ids) <= set(written)
        assert all(n == BATCH for n, _ in sizes)
        assert all(k <= round(BATCH * (1 - RATIO)) for _, k in sizes)
        parts = [p for p in new_parts if p]
        for part in parts:
            assert part == list(range(part[0], part[0] + len(part)))
        assert all(a[-1] < b[0] for a, b in itertools.pairwise(parts))
        assert parts[-1][-1] == total - 1
        c = stats["consumers"][f"learner-{i}"]
        assert c["received_new"] == len(new_ids) and c["dropped"] == 0 and c["pending"] == 0
        assert c["received_new"] + c["skipped"] == total
    assert stats["counter"] == total and stats["size"] == total
    stored = ray.get(buffer.state_dict.remote())["columns"]
    stored_ids = stored["speaker_0/obs"][:, 0].astype(np.int64)
    assert sorted(stored_ids.tolist()) == written
    members = stored["__member__"]
    np.testing.assert_array_equal(members, stored_ids // 100_000)  # tagged with their writer
    ray.kill(buffer)


def test_rate_limited_add_is_refused_and_stores_nothing(ray_local) -> None:
    ray = ray_local
    buffer = make_buffer_actor(
        buffer_kwargs(samples_per_insert=1.0, error_buffer=40, learning_starts=10), num_cpus=0
    )
    first = ray.get(buffer.add.remote(TransitionChunk(rows(np.arange(10)))))
    assert first.accepted and first.counter == 10
    refused = ray.get(buffer.add.remote(TransitionChunk(rows(np.arange(10, 70)))))
    assert (refused.accepted, refused.rows, refused.counter) == (False, 0, 10)
    [batches] = ray.get(buffer.sample.remote(request("c", 16, 10)))
    # samples may run ahead of inserts by error_buffer - offset = 40 - 10: 40 rows, 2 batches of 16
    assert len(batches) == 2
    assert ray.get(buffer.add.remote(TransitionChunk(rows(np.arange(10, 40))))).accepted
    assert ray.get(buffer.stats.remote())["refused_chunks"] == 1
    ray.kill(buffer)


def test_state_dict_and_load_through_the_actor(ray_local) -> None:
    """A checkpoint's buffer state read from one actor and loaded into another (a resume)."""
    ray = ray_local
    a = make_buffer_actor(buffer_kwargs(), num_cpus=0)
    ray.get(a.add.remote(TransitionChunk(rows(np.arange(40)), member=2)))
    ray.get(a.sample.remote(request("learner-2", 15, spec=ReadSpec.stream(2))))
    b = make_buffer_actor(buffer_kwargs(), num_cpus=0)
    ray.get(b.load_state_dict.remote(a.state_dict.remote()))
    stats = ray.get(b.stats.remote())
    assert stats["counter"] == 40 and stats["consumers"]["learner-2"]["cursor"] == 15
    [[batch]] = ray.get(b.sample.remote(request("learner-2", 100, spec=ReadSpec.stream(2))))
    np.testing.assert_array_equal(batch.indices, np.arange(15, 40))
    ray.kill(a)
    ray.kill(b)


def test_bad_chunk_through_the_actor_names_the_problem(ray_local) -> None:
    ray = ray_local
    buffer = make_buffer_actor(buffer_kwargs(), num_cpus=0)
    ray.get(buffer.add.remote(TransitionChunk(rows(np.arange(5)))))
    bad = rows(np.arange(5, 10))
    bad["obs"]["listener_0"] = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match=r"agent 'listener_0' field 'obs': shape \(5, 4\)"):
        ray.get(buffer.add.remote(TransitionChunk(bad)))
    assert ray.get(buffer.stats.remote())["counter"] == 5
    ray.kill(buffer)


def test_shell_counts_rows_of_structured_chunks() -> None:
    shell = BufferShell({"memory_size": 10, "field_names": ["obs"], "agent_ids": ["a"]})
    result = shell.add(TransitionChunk({"obs": {"a": {"x": np.zeros((3, 2)), "y": np.ones((3,))}}}))
    assert result == (True, 3, 3)


def test_joined_sampling_through_the_actor_mixes_new_rows_in(ray_local) -> None:
    from distmarl.runtime.actors.clients import RemoteBuffer

    ray = ray_local
    buffer = make_buffer_actor(buffer_kwargs(replay_ratio=0.5), num_cpus=0)
    ray.get([buffer.add.remote(TransitionChunk(rows(np.arange(s, s + 20)), member=(s // 20) % 2))
             for s in range(0, 200, 20)])
    one = RemoteBuffer(buffer).sample_joined(request("off", 32, 2, spec=ReadSpec.mixin(0.5)))
    assert one.rows == [[32], [32]] and one.num_new[0] == [16]  # the newest rows, then replay
    assert len(one.indices[0]) == 64 and one.data[0]["speaker_0"].flags.writeable
    np.testing.assert_array_equal(check_aligned(one.data), one.indices[0])
    ray.kill(buffer)


def test_one_call_samples_each_consumers_own_batches_as_separate_calls_would() -> None:
    """A learner hosting several members draws their batches in one call: each request gets
    what its own call would have (the same rows, the same new / replay split), in order, and
    the rows come back update by update (every request's first batch, then every second)."""
    from distmarl.buffers.wire import pack_joined, unpack_joined

    shells = [BufferShell(buffer_kwargs()) for _ in range(2)]
    for shell in shells:
        for s in range(0, 200, 20):
            shell.add(TransitionChunk(rows(np.arange(s, s + 20))))
    half, quarter = ReadSpec.mixin(0.5), ReadSpec.mixin(0.25)
    requests = [SampleRequest("learner-0", 16, 3, half), SampleRequest("learner-1", 8, 2, quarter),
                SampleRequest("learner-0", 16, 2, half)]
    together = unpack_joined(pack_joined(shells[0].sample_joined(requests)))
    apart = [shells[1].sample([r])[0] for r in requests]
    assert together.rows == [[16, 8, 16], [16, 8, 16], [16, 0, 0]]
    row_ids = check_aligned(together.data)
    for r, theirs in enumerate(apart):
        spans = together.batches(r)
        assert len(spans) == len(theirs)
        np.testing.assert_array_equal(together.indices[r],
                                      np.concatenate([b.indices for b in theirs]))
        for u, ((start, n), b) in enumerate(zip(spans, theirs, strict=True)):
            assert together.num_new[u][r] == b.num_new
            np.testing.assert_array_equal(row_ids[start:start + n], check_aligned(b.data))
