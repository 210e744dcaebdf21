"""Batches to tensors: one stacked copy per array path (what an accelerator's learner sends)
gives the same tensors as one copy per batch."""

from __future__ import annotations

import numpy as np
import torch

from distmarl.buffers.tensors import to_torch, to_torch_batches


def _batch(seed: int, rows: int = 4) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": {"a": rng.random((rows, 3), dtype=np.float32),
                    "b": {"image": rng.integers(0, 255, (rows, 2, 2), dtype=np.uint8)}},
            "terminated": {"a": rng.random(rows) > 0.5, "b": rng.random(rows) > 0.5},
            "pair": (rng.integers(0, 5, rows), rng.random(rows))}


def _same(x, y) -> bool:
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, tuple):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x.dtype == y.dtype and x.device == y.device and torch.equal(x, y)


def test_stacked_batches_equal_batch_by_batch() -> None:
    batches = [_batch(s) for s in range(3)]
    stacked = to_torch_batches(batches, "cpu", stack=True)
    assert len(stacked) == 3
    assert all(_same(s, to_torch(b, "cpu")) for s, b in zip(stacked, batches))
    assert stacked[0]["terminated"]["a"].dtype == torch.float32  # bools as to_torch makes them
    # the views share one copy per path
    assert (stacked[0]["obs"]["a"].untyped_storage().data_ptr()
            == stacked[2]["obs"]["a"].untyped_storage().data_ptr())


def test_a_path_whose_shapes_differ_goes_batch_by_batch() -> None:
    batches = [_batch(0, rows=4), _batch(1, rows=5)]
    out = to_torch_batches(batches, "cpu", stack=True)
    assert [len(o["obs"]["a"]) for o in out] == [4, 5]
    assert all(_same(o, to_torch(b)) for o, b in zip(out, batches))


def test_on_the_cpu_batches_stay_zero_copy() -> None:
    batches = [_batch(s) for s in range(2)]
    out = to_torch_batches(batches, "cpu")
    assert out[1]["obs"]["a"].numpy().base is not None
    assert np.shares_memory(out[1]["obs"]["a"].numpy(), batches[1]["obs"]["a"])
    assert to_torch_batches([], "cpu") == []
