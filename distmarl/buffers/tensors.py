"""numpy batch -> torch tensors (the only place the buffer package touches torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


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
    if isinstance(data, np.ndarray):
        return to_tensor(data, device)
    if isinstance(data, dict):
        return {k: to_torch(v, device) for k, v in data.items()}
    if isinstance(data, tuple):
        return tuple([to_torch(v, device) for v in data])
    return to_tensor(np.asarray(data), device)
