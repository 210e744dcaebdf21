"""FragmentReader against a real buffer actor: whole fragments of its own member, each once, and
the guards that realign the stream after rows were lost or handed out again."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.runtime.actors.clients import RemoteBuffer
from distmarl.runtime.actors.fragments import fragment_problem
from distmarl.types import ON_POLICY_FIELDS, TransitionChunk

pytestmark = pytest.mark.ray

AGENTS = ["a", "b"]
NUM_ENVS = 2


def fragment(rows: int, start: float) -> dict:
    """``rows`` rows whose ``reward`` counts up from ``start`` (to tell rows apart)."""
    scalar = np.arange(start, start + rows, dtype=np.float32)
    values = {"obs": np.zeros((rows, 3), np.float32), "action": np.zeros((rows, 2), np.float32),
              "reward": scalar, "terminated": np.zeros(rows, bool),
              "truncated": np.zeros(rows, bool), "active": np.ones(rows, bool),
              "log_prob": scalar, "value": scalar, "next_value": scalar}
    return {f: {a: values[f] for a in AGENTS} for f in ON_POLICY_FIELDS}


@pytest.fixture
def buffer(ray_local):
    from distmarl.runtime.actors.buffer import make_buffer_actor

    def make(capacity: int = 1000):
        return make_buffer_actor({"memory_size": capacity, "field_names": list(ON_POLICY_FIELDS),
                                  "agent_ids": AGENTS, "learning_starts": 0, "seed": 0},
                                 num_cpus=0)
    return make


def add(ray, buf, rows: int, member: int) -> None:
    assert ray.get(buf.add.remote(TransitionChunk(fragment(rows, 0.0), member))).accepted


def test_fragment_problem_names_what_is_wrong() -> None:
    assert fragment_problem(np.arange(10, 18), 8, 10) is None
    assert "7 rows" in fragment_problem(np.arange(10, 17), 8, 0)
    assert "not one fragment" in fragment_problem(np.r_[0:4, 6:10], 8, 0)
    assert "already used" in fragment_problem(np.arange(10, 18), 8, 12)


def test_reads_own_whole_fragments_once_in_order(ray_local, buffer) -> None:
    from distmarl.runtime.actors.fragments import FragmentReader

    ray, buf = ray_local, buffer()
    for member in (0, 1, 0, 0, 1):  # rows 0-7, 8-15, 16-23, 24-31, 32-39
        add(ray, buf, 8, member)
    zero = FragmentReader(RemoteBuffer(buf), "learner-0", 0, NUM_ENVS)
    one = FragmentReader(RemoteBuffer(buf), "learner-1", 1, NUM_ENVS)
    first = zero.read(learn_step=4, max_fragments=2)
    assert [b.indices.tolist() for b in first] == [list(range(0, 8)), list(range(16, 24))]
    assert first[0].data[ON_POLICY_FIELDS.index("reward")]["a"].shape == (8, 1)
    assert [b.indices[0] for b in zero.read(4, 5)] == [24]
    assert zero.read(4, 5) == []  # nothing new: nothing returned
    assert [b.indices[0] for b in one.read(4, 5)] == [8, 32]
    assert zero.used() == [(0, 8), (16, 24), (24, 32)] and zero.discarded_rows == 0
    add(ray, buf, 8, 1)
    assert zero.read(4, 1) == [] and len(one.read(4, 1)) == 1


def test_a_fragment_cut_by_the_ring_is_dropped_and_the_stream_realigned(ray_local, buffer) -> None:
    from distmarl.runtime.actors.fragments import FragmentReader

    ray, buf = ray_local, buffer(capacity=20)
    reader = FragmentReader(RemoteBuffer(buf), "learner-0", 0, NUM_ENVS)
    add(ray, buf, 2, 1)
    assert reader.read(learn_step=5, max_fragments=2) == []  # none of member 0's rows yet
    add(ray, buf, 10, 0)
    add(ray, buf, 10, 0)  # rows 2-21, two adjacent fragments of member 0
    add(ray, buf, 5, 1)  # rows 22-26 overwrite rows 0-6: rows 7-16 look like a fragment
    assert reader.read(learn_step=5, max_fragments=2) == []
    assert reader.discarded_rows == 15  # the cut fragment and the one after it
    add(ray, buf, 10, 0)  # rows 27-36
    assert [b.indices[0] for b in reader.read(5, 2)] == [27]


def test_a_wrong_size_or_a_used_row_is_dropped(ray_local, buffer) -> None:
    from distmarl.runtime.actors.fragments import FragmentReader

    ray, buf = ray_local, buffer()
    reader = FragmentReader(RemoteBuffer(buf), "learner-0", 0, NUM_ENVS)
    add(ray, buf, 6, 0)  # rows 0-5: a fragment of 3 steps where the learner expects 4
    add(ray, buf, 2, 1)
    add(ray, buf, 8, 0)  # rows 8-15
    assert reader.read(learn_step=4, max_fragments=2) == [] and reader.discarded_rows == 14
    before = ray.get(buf.state_dict.remote())
    add(ray, buf, 8, 0)  # rows 16-23
    assert [b.indices[0] for b in reader.read(4, 1)] == [16]
    ray.get(buf.load_state_dict.remote(before))  # a restored snapshot hands rows out again
    add(ray, buf, 8, 0)  # rows 16-23 again, already used
    assert reader.read(4, 1) == [] and reader.discarded_rows == 22
    add(ray, buf, 8, 0)
    assert [b.indices[0] for b in reader.read(4, 1)] == [24]


def test_the_stats_beside_a_read_are_the_buffers_after_it(ray_local, buffer) -> None:
    """One round trip carries the read and the stats a fragment reader checks it against; the
    stats must see the read (the consumer's rows received), else a dropped count would be
    compared with the counters of before."""
    from distmarl.types import ReadSpec, SampleRequest

    ray, buf = ray_local, buffer()
    add(ray, buf, 8, 0)
    add(ray, buf, 8, 0)
    request = SampleRequest("learner-0", 8, 1, ReadSpec.stream(0))
    sampled, stats = RemoteBuffer(buf).sample_then_stats([request])
    assert [b.indices.tolist() for b in sampled[0]] == [list(range(8))]
    assert stats["consumers"]["learner-0"]["pending"] == 8  # the first fragment received
    assert stats == ray.get(buf.stats.remote())
