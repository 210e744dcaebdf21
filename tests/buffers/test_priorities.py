"""Prioritised replay: sum-tree sampling proportions, importance weights, priority updates,
per-consumer trees, state and files."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.priorities import ConsumerPriorities
from distmarl.buffers.storage import RingStorage
from distmarl.buffers.sumtree import SumTree
from distmarl.types import ReadSpec
from tests.fakes import AGENTS, FIELDS, check_aligned, ids_of, rows

PER = {"alpha": 1.0, "beta": 1.0, "eps": 1e-6}


def _buffer(capacity: int = 100, **kwargs: object) -> MultiAgentReplayBuffer:
    args: dict = {"seed": 0, "prioritized": PER, **kwargs}
    return MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, **args)


def test_sum_tree_sums_and_finds_each_leafs_range() -> None:
    tree = SumTree(5)  # 8 leaves
    tree.set(np.array([0, 1, 2, 4, 4]), np.array([1.0, 2.0, 3.0, 9.0, 4.0]))  # last 4 wins
    assert tree.leaves == 8 and tree.total == 10.0
    np.testing.assert_array_equal(tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99, 6.0, 9.99])),
                                  [0, 0, 1, 1, 2, 2, 4, 4])
    rebuilt = SumTree(5)
    rebuilt.rebuild(tree.tree[tree.leaves:].copy())
    np.testing.assert_array_equal(rebuilt.tree, tree.tree)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_draws_follow_priorities_to_the_alpha(alpha: float) -> None:
    buf = _buffer(prioritized={**PER, "alpha": alpha})
    buf.add(rows(np.arange(4)))
    first = buf.read(4, "c")  # enters the rows at priority 1
    buf.update_priorities("c", first.indices, np.array([1.0, 2.0, 3.0, 4.0])[first.indices])
    drawn = np.concatenate([buf.read(1000, "c").indices for _ in range(100)])
    share = np.bincount(drawn, minlength=4) / len(drawn)
    p = np.arange(1, 5, dtype=float) ** alpha
    np.testing.assert_allclose(share, p / p.sum(), atol=0.005)  # 100k draws: se < 0.0016


def test_importance_weights_are_relative_to_the_batchs_least_likely_row() -> None:
    buf = _buffer(prioritized={**PER, "beta": 0.5})
    buf.add(rows(np.arange(3)))
    batch = buf.read(3, "c")
    assert batch.weights is not None
    np.testing.assert_allclose(batch.weights, 1.0)  # equal priorities
    buf.update_priorities("c", np.array([0, 1, 2]), np.array([1.0, 4.0, 16.0]))
    batch = buf.read(300, "c")
    idx = np.array(batch.indices)
    expected = (np.array([1.0, 4.0, 16.0])[idx] / 1.0) ** -0.5  # every row of 300 is drawn
    assert set(idx) == {0, 1, 2}
    np.testing.assert_allclose(batch.weights, expected, rtol=1e-5)
    check_aligned(batch.data)
    np.testing.assert_array_equal(ids_of(batch.data[0]["speaker_0"]), idx)


def test_new_rows_enter_at_the_largest_priority_and_mix_in_rows_weigh_one() -> None:
    buf = _buffer(replay_ratio=0.5)
    buf.add(rows(np.arange(10)))
    batch = buf.read(10, "c")
    buf.update_priorities("c", np.arange(10), np.where(np.arange(10) == 3, 50.0, 0.0))
    buf.add(rows(np.arange(10, 12)))
    batch = buf.read(4, "c")
    assert batch.num_new == 2 and list(batch.indices[:2]) == [10, 11]
    np.testing.assert_array_equal(batch.weights[:2], 1.0)
    drawn = np.concatenate([buf.read(100, "c").indices for _ in range(50)])
    share = np.bincount(drawn, minlength=12) / len(drawn)
    # rows 3, 10 and 11 hold priority 50 each (new rows enter at the largest seen), the rest ~0
    np.testing.assert_allclose(share[[3, 10, 11]], 1 / 3, atol=0.03)
    assert share[[0, 1, 2, 4, 5, 6, 7, 8, 9]].sum() < 1e-3


def test_an_update_for_an_overwritten_row_is_left_out() -> None:
    buf = _buffer(capacity=8)
    buf.add(rows(np.arange(8)))
    batch = buf.read(8, "c")
    buf.add(rows(np.arange(8, 12)))  # rows 0-3 overwritten
    updated = buf.update_priorities("c", batch.indices, np.full(8, 7.0))
    assert updated == sum(1 for i in batch.indices if i >= 4)
    drawn = np.concatenate([buf.read(64, "c").indices for _ in range(20)])
    assert drawn.min() >= 4 and drawn.max() <= 11


def test_consumers_keep_their_own_priorities_and_members() -> None:
    buf = _buffer()
    buf.add(rows(np.arange(20)), member=0)
    buf.add(rows(np.arange(20, 40)), member=1)
    buf.register("a", ReadSpec.replay(member=1))
    a = buf.read(20, "a")
    assert set(a.indices) <= set(range(20, 40))
    buf.read(20, "b")
    buf.update_priorities("a", np.array([25]), np.array([1e6]))
    assert (buf.read(200, "a").indices == 25).mean() > 0.9
    assert (buf.read(200, "b").indices == 25).mean() < 0.1  # b's tree is untouched
    buf.register("a", ReadSpec.replay(member=0))
    with pytest.raises(ValueError, match="member 1's rows before"):
        buf.read(4, "a")


def test_a_consumers_registered_alpha_and_beta_override_the_buffers() -> None:
    """A member registers its own exponents, and again when a mutation changes them."""
    buf = _buffer()
    buf.add(rows(np.arange(2)))
    buf.read(2, "c")
    buf.update_priorities("c", np.array([0, 1]), np.array([1.0, 9.0]))
    buf.register("c", ReadSpec.replay(alpha=0.0))
    flat = np.concatenate([buf.read(1000, "c").indices for _ in range(20)])
    assert abs(flat.mean() - 0.5) < 0.02  # alpha 0: uniform again
    buf.register("c", ReadSpec.replay(alpha=1.0))
    sharp = np.concatenate([buf.read(1000, "c").indices for _ in range(20)])
    assert abs(sharp.mean() - 0.9) < 0.02  # back to 1: the raw priorities were kept
    buf.register("c", ReadSpec.replay(beta=0.0))
    assert np.allclose(buf.read(50, "c").weights, 1.0)


def test_state_round_trip_and_file_keep_priorities(tmp_path) -> None:
    a = _buffer(capacity=16, replay_ratio=0.25)
    a.add(rows(np.arange(20)), member=2)
    a.register("c", ReadSpec.mixin(0.25, member=2))
    first = a.read(8, "c")
    a.update_priorities("c", first.indices, np.arange(8, dtype=float))
    a.add(rows(np.arange(20, 22)), member=2)  # not yet entered in c's tree
    b = _buffer(capacity=16, replay_ratio=0.25, seed=5)
    b.load_state_dict(a.state_dict())
    c = MultiAgentReplayBuffer.load(a.save(tmp_path / "buf.arrow"))
    for _ in range(3):
        sa, sb, sc = (x.read(8, "c") for x in (a, b, c))  # b and c loaded c's read
        for other in (sb, sc):
            np.testing.assert_array_equal(sa.indices, other.indices)
            np.testing.assert_array_equal(sa.weights, other.weights)
        update = np.arange(8, dtype=float) * (_ + 2)
        for x, s in ((a, sa), (b, sb), (c, sc)):
            x.update_priorities("c", s.indices, update)


def test_a_smaller_buffer_keeps_the_newest_rows_priorities() -> None:
    a = _buffer(capacity=16)
    a.add(rows(np.arange(16)))
    a.read(16, "c")
    a.update_priorities("c", np.arange(16), np.where(np.arange(16) == 12, 1e6, 0.0))
    b = _buffer(capacity=8)
    b.load_state_dict(a.state_dict())
    assert (b.read(100, "c").indices == 12).mean() > 0.9


def test_priorities_leave_uniform_buffers_alone() -> None:
    plain = MultiAgentReplayBuffer(100, FIELDS, AGENTS, seed=0)
    plain.add(rows(np.arange(10)))
    assert plain.read(4, "c").weights is None
    with pytest.raises(ValueError, match="prioritized"):
        plain.update_priorities("c", np.array([0]), np.array([1.0]))
    prioritized = _buffer()
    prioritized.add(rows(np.arange(10)))
    prioritized.read(4, "c")
    plain.load_state_dict(prioritized.state_dict())  # switching it off drops the priorities
    assert plain.read(4, "c").weights is None


@pytest.mark.parametrize(("per", "field"), [({"alpha": -0.1}, "alpha"), ({"beta": 1.5}, "beta"),
                                            ({"eps": 0.0}, "eps")])
def test_bad_priority_settings_name_the_setting(per: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"prioritized_replay_{field}"):
        _buffer(prioritized={**PER, **per})


def test_bad_updates_and_overrides_change_nothing() -> None:
    buf = _buffer()
    buf.add(rows(np.arange(4)))
    with pytest.raises(ValueError, match="sampled nothing"):
        buf.update_priorities("c", np.array([0]), np.array([1.0]))
    buf.read(4, "c")
    before = buf.state_dict()
    with pytest.raises(ValueError, match="2 indices and 3 td errors"):
        buf.update_priorities("c", np.array([0, 1]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="prioritized_replay_alpha"):
        buf.register("c", ReadSpec.replay(alpha=-1.0))
    with pytest.raises(ValueError, match="prioritized_replay_beta"):
        buf.register("c", ReadSpec.replay(beta=2.0))
    after = buf.state_dict()
    assert after["meta"]["priorities"] == before["meta"]["priorities"]
    np.testing.assert_array_equal(after["columns"]["__priority__/c"],
                                  before["columns"]["__priority__/c"])


def test_consumer_priorities_map_ring_positions_back_to_rows() -> None:
    from distmarl.buffers.schema import ColumnSpec

    storage = RingStorage(5, [ColumnSpec("a", "x", (), (), np.dtype(np.float32))])
    storage.write([np.arange(7, dtype=np.float32)], 7, None)  # rows 2..6 stored, wrapped
    tree = ConsumerPriorities(5, 1.0, None)
    idx, w = tree.draw(storage, 500, 1.0, np.random.default_rng(0))
    assert set(idx) == {2, 3, 4, 5, 6} and np.allclose(w, 1.0)
