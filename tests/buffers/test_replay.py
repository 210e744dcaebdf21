"""MultiAgentReplayBuffer: storage, alignment, mix-in sampling, consumers, API compatibility."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.wire import pack_joined, unpack_joined
from distmarl.types import ReadSpec
from tests.fakes import AGENTS, FIELDS, check_aligned, ids_of, rows, step_args


def make(capacity: int = 100, **kw) -> MultiAgentReplayBuffer:
    return MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, seed=0, **kw)


def test_ring_wraps_and_keeps_the_newest_rows() -> None:
    buf = make(10)
    for start in range(0, 25, 5):
        buf.save_to_memory(*step_args(np.arange(start, start + 5)), is_vectorised=True)
    assert len(buf) == 10 and buf.counter == 25
    values, _ = buf.storage.logical_columns()
    np.testing.assert_array_equal(values[0][:, 0], np.arange(15, 25))  # speaker obs, oldest first
    # a chunk larger than the whole ring keeps its last `capacity` rows
    buf.add(rows(np.arange(100, 123)))
    values, _ = buf.storage.logical_columns()
    np.testing.assert_array_equal(values[0][:, 0], np.arange(113, 123))
    assert buf.counter == 48


def test_uniform_samples_are_aligned_across_fields_and_agents() -> None:
    buf = make(64)
    for start in range(0, 200, 8):  # wraps three times
        buf.save_to_memory(*step_args(np.arange(start, start + 8)), is_vectorised=True)
    batch = buf.read(256)
    ids = check_aligned(batch.data)
    assert ids.min() >= 200 - 64 and ids.max() < 200
    np.testing.assert_array_equal(ids, batch.indices)
    assert len(np.unique(ids)) > 50  # uniform over the 64 stored rows


def test_sample_returns_tensors_in_field_order_with_scalar_fields_as_columns() -> None:
    buf = make(50)
    buf.save_to_memory(*step_args(np.arange(20)), is_vectorised=True)
    obs, action, reward, next_obs, done = buf.sample(16)
    assert obs["listener_0"].shape == (16, 11) and obs["speaker_0"].shape == (16, 3)
    assert action["listener_0"].shape == (16, 5)
    assert reward["speaker_0"].shape == (16, 1) and done["speaker_0"].shape == (16, 1)
    assert isinstance(obs["speaker_0"], torch.Tensor) and obs["speaker_0"].dtype == torch.float32
    assert done["speaker_0"].dtype == torch.float32  # bool masks become floats, as AgileRL's
    check_aligned(tuple({a: t.numpy() for a, t in d.items()} for d in (obs, action, reward, next_obs, done)))


def test_single_env_saves_and_agilerl_helpers() -> None:
    buf = make(10)
    for i in range(3):
        single = tuple({a: v[0] for a, v in field.items()} for field in step_args(np.array([i])))
        buf.save_to_memory(*single)  # one env step, no leading axis
    assert buf.save_to_memory_single_env(*tuple({a: v[0] for a, v in f.items()} for f in step_args(np.array([3])))) == 1
    assert buf.save_to_memory_vect_envs(*step_args(np.arange(4, 7))) == 3
    assert len(buf) == 7 and buf.counter == 7
    ids = check_aligned(buf.read(50).data)
    assert set(ids) == set(range(7))
    # stack_transitions: values over steps -> (steps, ...), per key (nested dicts too)
    steps = [{"a": np.full(2, i), "b": {"x": np.full(3, i), "n": i}} for i in range(4)]
    stacked = MultiAgentReplayBuffer.stack_transitions(steps)
    assert stacked["a"].shape == (4, 2) and stacked["b"]["x"].shape == (4, 3)
    np.testing.assert_array_equal(stacked["b"]["x"][:, 0], np.arange(4))
    assert stacked["b"]["n"].shape == (4, 1)  # scalars as a column, as AgileRL stacks them


def test_python_floats_and_float64_are_stored_as_float32() -> None:
    buf = MultiAgentReplayBuffer(10, ["obs", "reward"], ["a"], seed=0)
    buf.save_to_memory({"a": np.zeros(2, dtype=np.float64)}, {"a": 1.5})
    buf.save_to_memory({"a": np.ones(2, dtype=np.float32)}, {"a": 2})  # int into a float column
    obs, reward = buf.read(8).data
    assert obs["a"].dtype == np.float32 and reward["a"].dtype == np.float32
    assert set(reward["a"][:, 0]) <= {1.5, 2.0}


def test_dict_and_tuple_observations_are_stored_per_key() -> None:
    buf = MultiAgentReplayBuffer(20, ["obs", "reward"], ["a", "b"], seed=0)
    for i in range(5):
        obs = {
            "a": {"pos": np.full((2, 2), i, np.float32), "img": np.full((2, 3, 4), i, np.uint8)},
            "b": (np.full((2, 1), i, np.float32), np.full((2,), i, np.int64)),
        }
        buf.save_to_memory(obs, {"a": np.full(2, i, np.float32), "b": np.full(2, i, np.float32)},
                           is_vectorised=True)
    assert [c.name for c in buf.schema.columns][:4] == ["a/obs/pos", "a/obs/img", "b/obs/0", "b/obs/1"]
    obs, reward = buf.read(32).data
    assert obs["a"]["img"].shape == (32, 3, 4) and obs["a"]["img"].dtype == np.uint8
    assert isinstance(obs["b"], tuple) and obs["b"][1].shape == (32, 1)
    np.testing.assert_array_equal(obs["a"]["pos"][:, 0], reward["a"][:, 0])
    np.testing.assert_array_equal(obs["b"][1][:, 0], reward["b"][:, 0])
    tensors = buf.sample(4)  # AgileRL's sample: float32 tensors, per key and position
    assert tensors[0]["a"]["img"].dtype == torch.float32
    assert tensors[0]["b"][1].dtype == torch.float32 and tensors[0]["b"][1].shape == (4, 1)


def test_mix_in_share_of_new_rows_is_exact() -> None:
    r = 0.25
    buf = make(10_000, replay_ratio=r)
    buf.add(rows(np.arange(1000)))
    buf.read(64, "learner")  # drain the backlog first
    while buf.stats()["consumers"]["learner"]["pending"]:
        buf.read(64, "learner")
    next_id, new_total, total = 1000, 0, 0
    for _ in range(500):
        buf.add(rows(np.arange(next_id, next_id + 64)))  # more than 48 new rows per sample
        next_id += 64
        batch = buf.read(64, "learner")
        assert len(batch.indices) == 64
        assert batch.num_new == round(64 * (1 - r)) == 48
        new_total += batch.num_new
        total += 64
        check_aligned(batch.data)
    assert abs(new_total / total - (1 - r)) < 1e-9


def test_the_ratio_a_stored_zero_reads_as_takes_whole_batches_of_new_rows() -> None:
    """A stored ``replay_ratio`` of 0 (it meant new rows only) reads as
    ``STORED_STREAM_RATIO``: its batches are all new rows while there are enough."""
    from distmarl.config.replay import STORED_STREAM_RATIO

    buf = make(10_000, replay_ratio=STORED_STREAM_RATIO)
    buf.add(rows(np.arange(100)))
    for batch_size in (8, 64, 4096):
        buf.add(rows(np.arange(100, 100 + batch_size)))
        batch = buf.read(batch_size, f"learner{batch_size}")
        assert batch.num_new == len(batch.indices) == batch_size


def test_mix_in_returns_the_just_added_rows_behind_a_backlog() -> None:
    """4,000 rows stored, one sample, then 8 new rows before each sample(64) at r = 0.75: the
    new part of every batch is exactly the 8 rows just added (8/64 of the batch), however
    large the backlog the first sample passed over."""
    buf = make(100_000, replay_ratio=0.75)
    buf.add(rows(np.arange(4000)))
    first = buf.read(64, "learner")
    assert first.num_new == 16
    np.testing.assert_array_equal(first.indices[:16], np.arange(3984, 4000))  # the newest
    assert buf.stats()["consumers"]["learner"]["skipped"] == 4000 - 16
    next_id, just_added_in_new, total = 4000, 0, 0
    for _ in range(300):
        just_added = np.arange(next_id, next_id + 8)
        buf.add(rows(just_added))
        next_id += 8
        batch = buf.read(64, "learner")
        ids = check_aligned(batch.data)
        assert len(ids) == 64 and batch.num_new == 8
        np.testing.assert_array_equal(ids[:8], just_added)
        assert np.isin(ids[8:], np.arange(next_id)).all()  # the rest is replay of stored rows
        just_added_in_new += int(np.isin(ids[: batch.num_new], just_added).sum())
        total += len(ids)
    assert just_added_in_new / total == 8 / 64
    stats = buf.stats()["consumers"]["learner"]
    assert (stats["received_new"], stats["skipped"], stats["pending"]) == (16 + 300 * 8, 3984, 0)


def test_mix_in_consumer_seen_first_gets_the_newest_rows() -> None:
    buf = make(10_000, replay_ratio=0.5)
    buf.add(rows(np.arange(300)))
    batch = buf.read(32, "late")
    assert batch.num_new == 16
    np.testing.assert_array_equal(batch.indices[:16], np.arange(284, 300))
    buf.add(rows(np.arange(300, 305)))
    after = buf.read(32, "late")  # fewer new rows than the share: all of them
    assert after.num_new == 5 and len(after.indices) == 32
    np.testing.assert_array_equal(after.indices[:5], np.arange(300, 305))
    assert buf.read(32, "late").num_new == 0  # nothing new: all replay
    c = buf.consumers["late"]
    assert (c.cursor, c.received_new, c.skipped, c.dropped) == (305, 21, 284, 0)


def test_mix_in_passes_over_older_rows_when_more_arrive_than_the_share() -> None:
    """More rows added between samples than the new share: the newest come back, the older
    ones are never returned as new (only as replay), and every row is received or skipped."""
    buf = make(10_000, replay_ratio=0.5)
    received: list[int] = []
    next_id = 0
    for n in [40, 3, 16, 17, 100, 1]:
        buf.add(rows(np.arange(next_id, next_id + n)))
        next_id += n
        batch = buf.read(32, "c")
        new = batch.indices[: batch.num_new].tolist()
        assert new == list(range(next_id - min(n, 16), next_id))
        received.extend(new)
    c = buf.consumers["c"]
    assert len(set(received)) == len(received) == c.received_new
    assert c.received_new + c.skipped == next_id


def test_mix_in_with_member_filter_returns_that_members_newest_rows() -> None:
    buf = make(1000, replay_ratio=0.5)
    for start in range(0, 120, 10):
        buf.add(rows(np.arange(start, start + 10)), member=(start // 10) % 3)
    buf.register("m1", ReadSpec.mixin(0.5, member=1))
    batch = buf.read(16, "m1")
    ids = check_aligned(batch.data)
    assert batch.num_new == 8 and set((ids // 10) % 3) == {1}
    np.testing.assert_array_equal(ids[:8], np.arange(102, 110))  # member 1's newest rows
    assert buf.consumers["m1"].skipped == 40 - 8  # member 1's older rows, not the others'


def test_a_stream_read_returns_each_new_row_once_then_none() -> None:
    """In-order streaming: a backlog comes back oldest first, each row once."""
    buf = make(1000)
    for consumer in ("c", "slow"):
        buf.register(consumer, ReadSpec.stream())
    buf.add(rows(np.arange(50)))
    a = buf.read(32, "c")
    b = buf.read(32, "c")
    assert len(a.indices) == 32 and len(b.indices) == 18  # fewer when fewer are new
    assert a.num_new == 32 and b.num_new == 18
    np.testing.assert_array_equal(np.concatenate([a.indices, b.indices]), np.arange(50))
    assert buf.read(32, "c") is None  # none new
    buf.add(rows(np.arange(50, 55)))
    np.testing.assert_array_equal(buf.read(32, "c").indices, np.arange(50, 55))


def test_consumers_are_independent() -> None:
    buf = make(1000)
    streams: dict[str, list[int]] = {f"learner-{i}": [] for i in range(4)}
    for name in streams:
        buf.register(name, ReadSpec.stream())
    rng = np.random.default_rng(1)
    next_id = 0
    for _ in range(60):
        n = int(rng.integers(1, 20))
        buf.add(rows(np.arange(next_id, next_id + n)))
        next_id += n
        for name, got in streams.items():
            if rng.random() < 0.5:  # consumers read at different paces
                batch = buf.read(int(rng.integers(1, 40)), name)
                if batch is not None:
                    got.extend(check_aligned(batch.data).tolist())
    for name, got in streams.items():
        while (batch := buf.read(64, name)) is not None:
            got.extend(check_aligned(batch.data).tolist())
        assert got == list(range(next_id)), name


def test_consumer_that_falls_behind_counts_dropped_rows() -> None:
    buf = make(10)
    buf.register("slow", ReadSpec.stream())
    buf.add(rows(np.arange(4)))
    assert buf.read(2, "slow").indices.tolist() == [0, 1]
    buf.add(rows(np.arange(4, 20)))  # rows 2..9 are overwritten before "slow" reads them
    assert buf.read(100, "slow").indices.tolist() == list(range(10, 20))
    assert buf.consumers["slow"].dropped == 8


def test_member_filter_returns_only_that_members_rows() -> None:
    buf = make(1000)
    for start in range(0, 120, 10):
        buf.add(rows(np.arange(start, start + 10)), member=(start // 10) % 3)
    mine = []
    buf.register("m1", ReadSpec.stream(member=1))
    while (batch := buf.read(7, "m1")) is not None:
        mine.extend(batch.indices.tolist())
    expected = [i for i in range(120) if (i // 10) % 3 == 1]
    assert mine == expected
    uniform = MultiAgentReplayBuffer(1000, FIELDS, AGENTS, seed=0)
    for start in range(0, 120, 10):
        uniform.add(rows(np.arange(start, start + 10)), member=(start // 10) % 3)
    uniform.register("two", ReadSpec.replay(member=2))
    ids = ids_of(uniform.read(200, "two").data[0]["speaker_0"])
    assert set((ids // 10) % 3) == {2}


def test_learning_starts() -> None:
    buf = make(100, learning_starts=30)
    buf.add(rows(np.arange(29)))
    assert buf.sample(8) is None and buf.read(8) is None
    buf.add(rows(np.arange(29, 30)))
    assert buf.read(8) is not None


def test_same_seed_same_samples() -> None:
    a, b = make(100), make(100)
    for buf in (a, b):
        buf.add(rows(np.arange(80)))
    np.testing.assert_array_equal(a.read(32).indices, b.read(32).indices)


def test_a_registered_read_streams_one_members_rows_from_a_mixing_buffer() -> None:
    """An on-policy learner registers a stream of its own member's rows in a buffer built
    for mix-in; other consumers keep the buffer's default read, or register their own."""
    buf = make(1000, replay_ratio=0.5)
    for start in range(0, 80, 10):
        buf.add(rows(np.arange(start, start + 10)), member=(start // 10) % 2)
    got = []
    buf.register("onpolicy-1", ReadSpec.stream(member=1))
    while (batch := buf.read(6, "onpolicy-1")) is not None:
        assert batch.num_new == len(batch.indices)  # nothing replayed
        got.extend(check_aligned(batch.data).tolist())
    assert got == [i for i in range(80) if (i // 10) % 2 == 1]  # each once, in order
    mixed = buf.read(10, "offpolicy")
    assert mixed.num_new == 5 and len(mixed.indices) == 10  # the buffer's own 0.5
    buf.register("u", ReadSpec.replay())
    uniform = buf.read(10, "u")
    assert uniform.num_new == 0 and len(uniform.indices) == 10
    buf.register("offpolicy", ReadSpec.replay())  # registered again: replay only from now on
    assert buf.read(10, "offpolicy").num_new == 0


def test_a_read_without_meaning_is_named() -> None:
    """A mix-in ratio outside (0, 1) (0 once meant streaming: a stream read says so), a
    ratio on a stream or replay read, exponents on a stream; a buffer's default ratio too."""
    for bad in (1.0, 0.0, -0.1):
        with pytest.raises(ValueError, match=r"replay_ratio must be in \(0, 1\), got .*a "
                                             r"stream read"):
            ReadSpec.mixin(bad)
    with pytest.raises(ValueError, match="a stream read has no replay_ratio"):
        ReadSpec("stream", 0.5)
    with pytest.raises(ValueError, match="a mixin read needs replay_ratio"):
        ReadSpec("mixin")
    with pytest.raises(ValueError, match="a stream read replays nothing"):
        ReadSpec("stream", alpha=0.5)
    with pytest.raises(ValueError, match=r"replay_ratio must be None \(replay only\) or in "
                                         r"\(0, 1\), got 0.0 .*ReadSpec.stream"):
        make(100, replay_ratio=0.0)


def test_a_buffer_ratio_of_one_points_to_replay_only() -> None:
    """1 (or more) asks for replay only: the message names replay_ratio=None and
    ReadSpec.replay(), not a stream read."""
    for ratio in (1.0, 2.0):
        with pytest.raises(ValueError) as err:
            make(100, replay_ratio=ratio)
        message = str(err.value)
        assert message == (
            f"replay_ratio must be None (replay only) or in (0, 1), got {ratio} (a ratio of 1 "
            "replays only: leave replay_ratio=None, the buffer's default read then replays "
            "only, or register ReadSpec.replay() for the consumer)")
        assert "stream" not in message


def test_a_joined_sample_is_the_reads_one_after_another_and_packs_exactly() -> None:
    """``read_many`` draws as ``read`` calls in request order would (a twin buffer's reads),
    and gathers the rows update by update; packed and unpacked it is the same."""
    bufs = [make(1000, replay_ratio=0.5) for _ in range(2)]
    for buf in bufs:
        buf.add(rows(np.arange(300)), member=2)
    joined = bufs[0].read_many([("c", 64, 3), ("d", 32, 2)])
    apart = [[bufs[1].read(64, "c") for _ in range(3)], [bufs[1].read(32, "d") for _ in range(2)]]
    back = unpack_joined(pack_joined(joined))
    assert back.rows == joined.rows == [[64, 32], [64, 32], [64, 0]]
    ids = check_aligned(back.data)
    for r, batches in enumerate(apart):
        for (start, n), b in zip(back.batches(r), batches, strict=True):
            np.testing.assert_array_equal(ids[start:start + n], b.indices)
    for fa, fb in zip(joined.data, back.data, strict=True):
        for agent in AGENTS:
            np.testing.assert_array_equal(fa[agent], fb[agent])
            assert fa[agent].dtype == fb[agent].dtype and fb[agent].flags.writeable
    empty = make(1000).read_many([("c", 8, 2)])  # nothing stored: no batch, no rows
    assert empty.rows == [] and len(empty.indices[0]) == 0


def test_packed_samples_of_another_wire_version_are_refused() -> None:
    import pickle

    with pytest.raises(ValueError, match="wire version 99"):
        unpack_joined(pickle.dumps((99, ())))
