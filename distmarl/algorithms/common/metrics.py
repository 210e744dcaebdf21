"""Metrics of several updates read from the device in one go.

On a GPU every read of a tensor's value (``float(t)``, ``t.item()``, ``t.cpu()``) waits for
the queue of kernels to drain; reading each update's losses as it ends would stall the device
between updates. Updates return their metrics as 0-dim tensors instead, and a train call reads
them all at its end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def to_floats(metrics: Sequence[Mapping[str, torch.Tensor]]) -> list[dict[str, float]]:
    """Each update's ``{key: 0-dim tensor}`` as ``{key: float}``, in one device read."""
    flat = [v.detach().reshape(()).float() for m in metrics for v in m.values()]
    if not flat:
        return [{} for _ in metrics]
    values = iter(torch.stack(flat).cpu().tolist())
    return [{k: next(values) for k in m} for m in metrics]
