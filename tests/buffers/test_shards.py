"""Replay shards: writes in turn, reads of every shard joined, each shard's grants, priorities
and cursors its own."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.buffers.grants import UpdateGrants
from distmarl.buffers.shards import ShardLayout, merge_stats, resolve_shards
from distmarl.config.replay import UpdateRule
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.runtime.actors.clients import LocalBuffer
from distmarl.runtime.actors.fragments import ShardedFragments, fragment_reader
from distmarl.runtime.actors.shards import ShardedBuffer, shard_clients, sharded
from distmarl.types import Pace, PriorityUpdate, ReadSpec, SampleRequest, TransitionChunk
from tests.fakes import AGENTS, FIELDS, rows

KWARGS = {"memory_size": 100, "field_names": FIELDS, "agent_ids": AGENTS, "seed": 3}


EVERY = UpdateRule(0, 0)


def shards(n: int, rule: UpdateRule = EVERY, max_owed: int | None = None,
           prioritized: bool = False) -> list[BufferShell]:
    layout = ShardLayout(n)
    extra = {"prioritized": {"alpha": 1.0, "beta": 1.0, "eps": 1e-6}} if prioritized else {}
    return [BufferShell({**layout.buffer_kwargs(KWARGS, s), **extra},
                        UpdateGrants(layout.rule(rule), layout.max_owed(max_owed)))
            for s in range(n)]


def chunk(ids: np.ndarray, member: int = 0) -> TransitionChunk:
    return TransitionChunk(rows(ids), member, len(ids))


def test_a_layout_divides_limits_and_encodes_rows_of_every_shard_in_one_array() -> None:
    layout = ShardLayout(3)
    assert [layout.first_shard(w) for w in range(5)] == [0, 1, 2, 0, 1]
    assert layout.rule(UpdateRule(1000, 100)) == UpdateRule(334, 34)
    assert layout.max_owed(40) == 14 and layout.max_owed(None) is None
    assert layout.buffer_kwargs(KWARGS, 0) == {**KWARGS, "memory_size": 34}
    assert layout.buffer_kwargs(KWARGS, 2)["seed"] != 3
    encoded = np.concatenate([layout.encode(np.array([0, 5]), s) for s in range(3)])
    split = layout.priorities(PriorityUpdate(encoded, np.arange(6.0)))
    assert [(list(p.indices), list(p.td_errors)) for p in split if p is not None] == [
        ([0, 5], [0.0, 1.0]), ([0, 5], [2.0, 3.0]), ([0, 5], [4.0, 5.0])]
    one = ShardLayout(1)  # one shard: everything as it is
    assert one.rule(UpdateRule(7, 5)) == UpdateRule(7, 5)
    assert one.encode(np.array([4]), 0)[0] == 4
    assert resolve_shards("auto", nodes=3, writers=8) == 3
    assert resolve_shards("auto", nodes=3, writers=2) == 2 and resolve_shards(4, 1, 8) == 4


def test_writers_go_round_the_shards_and_a_paced_read_takes_what_each_shard_granted() -> None:
    shells = shards(2)
    clients = [LocalBuffer(s) for s in shells]
    writer = sharded(clients, first=1)
    assert isinstance(writer, ShardedBuffer) and sharded(clients[:1]) is clients[0]
    for k in range(4):  # 4 chunks of 8 steps: shards 1, 0, 1, 0
        assert writer.add(chunk(np.arange(8) + 8 * k)).accepted
    assert [s.buffer.counter for s in shells] == [16, 16]
    first_rows = shells[1].buffer.state_dict()["columns"]["speaker_0/reward"].ravel()[:8]
    np.testing.assert_array_equal(first_rows, np.arange(8) * 3)  # the first chunk: shard 1
    reader = sharded(clients)
    # 32 steps at learn_step 4: 8 updates, 4 on each shard; asking for 6 takes 4 + 4
    request = SampleRequest("learner-0", 5, 6, ReadSpec.replay(), None, Pace(0, 4.0))
    joined = reader.sample_joined(request for request in [request])
    assert len(joined.rows) == 8 and all(r == [5] for r in joined.rows)
    assert reader.sample_joined([request]).rows == []  # all granted
    assert len(joined.indices[0]) == 40
    shard = joined.indices[0] % 2
    assert list(shard[::5]) == [0, 0, 0, 0, 1, 1, 1, 1]  # shard after shard
    # every index names the row it returned: data and index agree across the shards
    rewards = joined.data[FIELDS.index("reward")]["speaker_0"].ravel()
    stored = {s: shells[s].buffer.state_dict()["columns"]["speaker_0/reward"].ravel()
              for s in range(2)}
    np.testing.assert_array_equal(
        rewards, [stored[int(i) % 2][int(i) // 2] for i in joined.indices[0]])
    # an unpaced read: each shard its share of the batches
    unpaced = reader.sample([SampleRequest("other", 4, 3, ReadSpec.replay())])
    assert len(unpaced[0]) == 4  # 2 per shard
    stats = merge_stats([s.stats() for s in shells])
    assert stats["counter"] == 32 and stats["capacity"] == 100 and len(stats["shards"]) == 2


def test_priorities_go_back_to_the_shard_that_holds_the_row() -> None:
    shells = shards(2, prioritized=True)
    clients = [LocalBuffer(s) for s in shells]
    writer = sharded(clients)
    for k in range(2):
        writer.add(chunk(np.arange(10) + 10 * k))
    reader = sharded(clients)
    read = reader.sample_joined([SampleRequest("c", 4, 1, ReadSpec.replay())])
    target = int(read.indices[0][-1])  # a row of shard 1
    assert target % 2 == 1
    reader.sample_joined([SampleRequest("c", 4, 1, ReadSpec.replay(),
                                        PriorityUpdate(np.array([target]), np.array([50.0])))])
    mine = shells[1].buffer.state_dict()["columns"]["__priority__/c"]
    assert mine[target // 2] == pytest.approx(50.0, rel=1e-3)
    assert shells[0].buffer.state_dict()["columns"]["__priority__/c"].max() < 50.0
    # with the row's priority far above the others, shard 1's batches are nearly all of it
    again = reader.sample_joined([SampleRequest("c", 64, 2, ReadSpec.replay())])
    assert np.mean(again.indices[0][64:] == target) > 0.8
    assert again.weights is not None and len(again.weights) == 128


def test_mixin_reads_take_each_shards_newest_rows_and_streams_take_each_row_once() -> None:
    clients = [LocalBuffer(s) for s in shards(2)]
    writer, reader = sharded(clients), sharded(clients)
    for k in range(4):
        writer.add(chunk(np.arange(6) + 6 * k))
    mixed = reader.sample_joined([SampleRequest("m", 8, 2, ReadSpec.mixin(0.5))])
    assert [n for (n,) in mixed.num_new] == [4, 4]  # each shard's newest unseen rows
    stream = reader.sample([SampleRequest("s", 5, 10, ReadSpec.stream())])[0]
    seen = np.concatenate([b.indices for b in stream])
    assert len(seen) == len(set(seen.tolist())) == 24  # every row once, over both shards


def test_fragments_are_read_shard_by_shard_with_each_shards_own_indices() -> None:
    clients = [LocalBuffer(s) for s in shards(2)]
    writer = sharded(clients)
    reader = fragment_reader(sharded(clients), "learner-0", 0, num_envs=2)
    assert isinstance(reader, ShardedFragments) and len(shard_clients(sharded(clients))) == 2
    for k in range(3):  # fragments of learn_step 4 x 2 envs: shards 0, 1, 0
        writer.add(chunk(np.arange(8) + 8 * k))
    first = reader.read(4, 2)
    assert len(first) == 2 and all(len(b.indices) == 8 for b in first)
    rest = reader.read(4, 5)
    assert len(rest) == 1 and reader.read(4, 5) == []
    assert sorted(reader.used()) == [(0, 8), (0, 8), (8, 16)]
    writer.add(chunk(np.arange(8)))
    assert reader.discard_pending() == 8 and reader.discarded_rows == 8
