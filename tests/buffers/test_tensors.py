"""Batches to tensors: on the CPU zero-copy, bools as float32 (masks multiply losses)."""

from __future__ import annotations

import numpy as np
import torch

from distmarl.buffers.tensors import to_torch


def _batch(seed: int, rows: int = 4) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": {"a": rng.random((rows, 3), dtype=np.float32),
                    "b": {"image": rng.integers(0, 255, (rows, 2, 2), dtype=np.uint8)}},
            "terminated": {"a": rng.random(rows) > 0.5, "b": rng.random(rows) > 0.5},
            "pair": (rng.integers(0, 5, rows), rng.random(rows))}


def test_on_the_cpu_arrays_stay_zero_copy_and_bools_become_float() -> None:
    batch = _batch(0)
    out = to_torch(batch, "cpu")
    assert np.shares_memory(out["obs"]["a"].numpy(), batch["obs"]["a"])
    assert out["obs"]["b"]["image"].dtype == torch.uint8
    assert out["terminated"]["a"].dtype == torch.float32
    np.testing.assert_array_equal(out["terminated"]["a"].numpy(), batch["terminated"]["a"])
    assert isinstance(out["pair"], tuple) and out["pair"][0].dtype == torch.int64
