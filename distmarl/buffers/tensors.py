"""numpy batch -> torch tensors (the only place the buffer package touches torch).

Two conversions: :func:`to_torch` keeps the stored dtypes (uint8 frames, int8 boards, int64
actions stay compact; what distmarl's learners read), :func:`to_float_torch` makes every leaf
float32 (what AgileRL's ``MultiAgentReplayBuffer.sample`` returns, so code written for it runs
unchanged on :meth:`~distmarl.buffers.replay.MultiAgentReplayBuffer.sample`).
"""

from __future__ import annotations

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
    if device is not None and torch.device(device).type != "cpu":
        # pinned, the copy to the device runs without the host waiting on it
        t = t.pin_memory().to(device, non_blocking=True)
    return t


def to_torch(data: Any, device: Any = None) -> Any:
    """Map :func:`to_tensor` over nested dicts / tuples of arrays."""
    return tree.map(lambda x: to_tensor(np.asarray(x), device), data)


def to_float_torch(data: Any, device: Any = None) -> Any:
    """:func:`to_torch` with every leaf as float32, as AgileRL's ``obs_to_tensor`` gives it:
    integer and bool columns are copied once as float32, float32 columns stay zero-copy."""
    return tree.map(lambda x: to_tensor(np.asarray(x).astype(np.float32, copy=False), device),
                    data)
