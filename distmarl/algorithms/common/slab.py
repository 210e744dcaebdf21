"""Weights leaving a learner: many small tensors as host arrays in one copy.

A member's published weights are dozens of small tensors (every layer's weight and bias of
every actor). Copied one by one, each is a device-to-host transfer of its own (on a GPU, a
synchronisation each); gathered first into one slab on the device, they leave in one copy,
and the arrays are views of it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch


def host_arrays(tensors: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """``tensors`` as numpy arrays on the host, in their shapes and dtypes: per dtype, every
    tensor flattened into one slab on its device, copied to the host once; each array is a
    view of its slab (a fresh copy, so the caller owns it)."""
    by_dtype: dict[torch.dtype, list[str]] = {}
    for name, t in tensors.items():
        by_dtype.setdefault(t.dtype, []).append(name)
    out: dict[str, np.ndarray] = {}
    for names in by_dtype.values():
        parts = [tensors[n].detach().reshape(-1) for n in names]
        slab = torch.cat(parts).cpu().numpy() if len(parts) > 1 else parts[0].cpu().numpy().copy()
        start = 0
        for name, part in zip(names, parts, strict=True):
            out[name] = slab[start:start + part.numel()].reshape(tuple(tensors[name].shape))
            start += part.numel()
    return {name: out[name] for name in tensors}
