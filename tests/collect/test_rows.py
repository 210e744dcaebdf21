"""ChunkRows: step-by-step writes give the same time-major rows as stacking, once."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.collect.rows import ChunkRows


def test_rows_are_time_major_and_keep_dtypes_and_structure() -> None:
    rows = ChunkRows(["obs", "reward"], ["a", "b"], num_steps=3)
    steps = []
    for t in range(3):
        obs = {"observation": np.full((2, 4, 4), t, np.uint8),  # 2 sub-envs
               "action_mask": np.array([[1, 0], [0, 1]], np.int8) * (t + 1)}
        rew = np.array([t, 10 + t], np.float32)
        steps.append((obs, rew))
        for a in ("a", "b"):
            rows.put(t, "obs", a, obs)
            rows.put(t, "reward", a, rew)
    data = rows.data()
    frame = data["obs"]["a"]["observation"]
    assert frame.shape == (6, 4, 4) and frame.dtype == np.uint8
    assert [int(frame[i, 0, 0]) for i in range(6)] == [0, 0, 1, 1, 2, 2]  # row t * E + e
    assert data["obs"]["b"]["action_mask"].dtype == np.int8
    np.testing.assert_array_equal(data["reward"]["a"], [0, 10, 1, 11, 2, 12])
    expected = np.stack([s[1] for s in steps]).reshape(6)
    np.testing.assert_array_equal(data["reward"]["b"], expected)


def test_a_stored_row_is_a_view_later_writes_reach() -> None:
    rows = ChunkRows(["next_value"], ["a"], num_steps=2)
    pending = rows.put(0, "next_value", "a", np.array([np.nan, 1.0], np.float32))
    rows.put(1, "next_value", "a", np.array([2.0, 3.0], np.float32))
    pending[np.isnan(pending)] = 7.0  # what the collector does with the next step's values
    np.testing.assert_array_equal(rows.data()["next_value"]["a"], [7.0, 1.0, 2.0, 3.0])


def test_tuples_and_incomplete_chunks() -> None:
    rows = ChunkRows(["obs"], ["a"], num_steps=2)
    rows.put(0, "obs", "a", (np.zeros((1, 2)), np.ones((1,), np.int64)))
    with pytest.raises(ValueError, match="1 of 2 steps written"):
        rows.data()
    rows.put(1, "obs", "a", (np.ones((1, 2)), np.zeros((1,), np.int64)))
    first, second = rows.data()["obs"]["a"]
    assert first.shape == (2, 2) and second.tolist() == [1, 0]
    with pytest.raises(ValueError, match="num_steps=0"):
        ChunkRows(["obs"], ["a"], 0)
