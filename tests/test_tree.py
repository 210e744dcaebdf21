"""The one walk over nested observations: dicts, tuples and their nesting, tested once here
for every module that maps, stacks, joins or takes rows of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl import tree


def nested(offset: float = 0.0) -> dict:
    """A dict holding a tuple holding a dict: every kind of node, arrays of 4 rows."""
    return {"pos": np.arange(8.0).reshape(4, 2) + offset,
            "parts": (np.ones(4) * offset, {"mask": np.array([1, 0, 1, 1], np.int8)})}


def test_map_keeps_the_structure_over_several_trees() -> None:
    out = tree.map(lambda a, b: a + b, nested(0.0), nested(1.0))
    assert isinstance(out["parts"], tuple) and isinstance(out["parts"][1], dict)
    np.testing.assert_array_equal(out["pos"], 2 * np.arange(8.0).reshape(4, 2) + 1)
    np.testing.assert_array_equal(out["parts"][1]["mask"], [2, 0, 2, 2])


def test_none_stands_for_a_subtree_of_none() -> None:
    """A member that draws nothing (None) beside one that draws a dict: the dict's structure,
    None at each of its leaves for the first."""
    seen = []
    tree.map(lambda *xs: seen.append(xs), None, {"a": 1, "b": (2, 3)})
    assert seen == [(None, 1), (None, 2), (None, 3)]
    assert tree.map(lambda x: x, None) is None


def test_mismatched_trees_fail() -> None:
    with pytest.raises(ValueError, match="lengths"):
        tree.map(lambda a, b: a, (1, 2), (1, 2, 3))
    with pytest.raises(KeyError):
        tree.map(lambda a, b: a, {"a": 1, "b": 2}, {"a": 1})


def test_flatten_and_unflatten_round_trip_in_a_fixed_order() -> None:
    value = nested()
    structure, pairs = tree.flatten(value)
    assert structure == {"pos": None, "parts": (None, {"mask": None})}
    assert [path for path, _ in pairs] == [("pos",), ("parts", 0), ("parts", 1, "mask")]
    back = tree.unflatten(structure, [leaf for _, leaf in pairs])
    assert tree.leaves(back) == tree.leaves(value) == [leaf for _, leaf in pairs]
    assert tree.first_leaf(value) is value["pos"]


def test_stack_concat_take_unstack() -> None:
    a, b = nested(0.0), nested(10.0)
    stacked = tree.stack([a, b])
    assert stacked["pos"].shape == (2, 4, 2) and stacked["parts"][1]["mask"].shape == (2, 4)
    joined = tree.concat([a, b])
    assert joined["pos"].shape == (8, 2) and isinstance(joined["pos"], np.ndarray)
    rows = tree.take(joined, np.array([0, 5]))
    np.testing.assert_array_equal(rows["parts"][0], [0.0, 10.0])
    first, second = tree.unstack(stacked, 2)
    np.testing.assert_array_equal(second["pos"], b["pos"])
    np.testing.assert_array_equal(first["parts"][1]["mask"], a["parts"][1]["mask"])


def test_tensors_join_with_torch_and_arrays_with_numpy() -> None:
    mixed = tree.concat([{"x": np.zeros((2, 3))}, {"x": torch.ones(1, 3, dtype=torch.float64)}])
    assert isinstance(mixed["x"], torch.Tensor) and mixed["x"].shape == (3, 3)
    stacked = tree.stack([(torch.zeros(2),), (torch.ones(2),)], axis=1)
    assert stacked[0].shape == (2, 2)
    assert tree.take({"x": torch.arange(6).reshape(2, 3)}, (1, 2))["x"].item() == 5


def test_prune_and_map_all() -> None:
    assert tree.prune({"a": 1, "b": None, "c": ({"d": None, "e": 2},)}) == {"a": 1, "c": ({"e": 2},)}
    doubled = tree.map_all(lambda x: 2 * x, {"a": [1, (2, 3)], "b": 4})
    assert doubled == {"a": [2, (4, 6)], "b": 8}
