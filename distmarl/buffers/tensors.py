"""numpy batch -> torch tensors (the only place the buffer package touches torch).

Two conversions: :func:`to_torch` keeps the stored dtypes (uint8 frames, int8 boards, int64
actions stay compact; what distmarl's learners read), :func:`to_float_torch` makes every leaf
float32 (what AgileRL's ``MultiAgentReplayBuffer.sample`` returns, so code written for it runs
unchanged on :meth:`~distmarl.buffers.replay.MultiAgentReplayBuffer.sample`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from distmarl import tree


def to_tensor(arr: np.ndarray, device: Any = None) -> torch.Tensor:
    """Zero-copy where possible; bools become float32 (masks multiply losses), integers stay
    int64-compatible (discrete actions index), floats keep their dtype."""
    if arr.dtype == np.bool_:  # numpy's cast is ~3x cheaper than torch's .float() here
        arr = arr.astype(np.float32)
    elif not arr.flags.writeable:  # arrays from Ray's object store are read-only: own a copy
        arr = np.array(arr)
    t = torch.from_numpy(arr)  # any non-negative strides; sampled arrays are contiguous anyway
    if device is not None and str(device) != "cpu":
        t = t.to(device, non_blocking=True)
    return t


def to_torch(data: Any, device: Any = None) -> Any:
    """Map :func:`to_tensor` over nested dicts / tuples of arrays."""
    return tree.map(lambda x: to_tensor(np.asarray(x), device), data)


def to_float_torch(data: Any, device: Any = None) -> Any:
    """:func:`to_torch` with every leaf as float32, as AgileRL's ``obs_to_tensor`` gives it:
    integer and bool columns are copied once as float32, float32 columns stay zero-copy."""
    return tree.map(lambda x: to_tensor(np.asarray(x).astype(np.float32, copy=False), device),
                    data)


def to_torch_batches(batches: Sequence[Any], device: Any = None,
                     stack: bool | None = None) -> list[Any]:
    """:func:`to_torch` of each of ``batches`` (nested dicts / tuples of arrays, one per
    update of a train call), on ``device``.

    On an accelerator (``stack`` None: any device but the CPU) each array path is stacked
    across the batches, pinned and sent in one non-blocking copy; the batches are views of it.
    One copy per path rather than one per path and batch: each host-to-device copy has a fixed
    cost, and a learner's batches are many small arrays. Paths whose shapes differ between
    batches go one by one. On the CPU the arrays stay zero-copy, batch by batch.
    """
    cpu = device is None or torch.device(device).type == "cpu"
    if not batches:
        return []
    if stack is None:
        stack = not cpu
    if not stack or len(batches) == 1:
        return [to_torch(b, device) for b in batches]
    return _stacked(list(batches), device, pin=not cpu)


def _stacked(batches: list[Any], device: Any, pin: bool) -> list[Any]:
    """See :func:`to_torch_batches`: the same nesting, every leaf a view of one stacked copy."""
    return tree.unstack(tree.map(lambda *xs: _stacked_leaf(xs, device, pin), *batches),
                        len(batches))


def _stacked_leaf(leaves: Sequence[Any], device: Any, pin: bool) -> list[torch.Tensor]:
    """One path's arrays of every batch as tensors: views of one stacked copy, or one by one
    where their shapes or dtypes differ."""
    arrays = [np.asarray(b) for b in leaves]
    if any(a.shape != arrays[0].shape or a.dtype != arrays[0].dtype for a in arrays):
        return [to_tensor(a, device) for a in arrays]
    t = to_tensor(np.stack(arrays))  # one host copy; bools become float32 as in to_tensor
    if pin:
        t = t.pin_memory()
    if device is not None:
        t = t.to(device, non_blocking=True)
    return list(t.unbind(0))
