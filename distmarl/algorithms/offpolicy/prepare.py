"""An off-policy stack's host side: its update inputs (the members' batches as one stacked
batch) and its results, read back per member.

Members' batches may differ in size (``batch_size`` evolves): each is padded to the largest
(or, for a compiled or captured step, to the :func:`bucket` above it) with inactive rows, which
the masked losses never count.

Shapes: ``K`` members, ``B`` rows (the largest batch); per agent ``(K, B, ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from distmarl import tree
from distmarl.algorithms.base import Batch
from distmarl.algorithms.common.observations import ObsReader
from distmarl.algorithms.common.space_tensors import ActionCodec, require_batch_keys
from distmarl.algorithms.offpolicy.banks import Bank
from distmarl.algorithms.offpolicy.batch import clean_batch
from distmarl.types import OFF_POLICY_FIELDS

Tree = dict[str, Any]
#: per member: its updates' metrics and (prioritised replay) its rows' new priorities
Result = tuple[list[dict[str, float]], np.ndarray | None]
#: the fields of a stacked batch (``Tree``: field -> agent -> ``(K, B, ...)``)
FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "active", "n_steps", "mask",
          "next_mask")


#: the smallest padded batch of a compiled or captured step
SMALLEST_BUCKET = 8


def bucket(rows: int) -> int:
    """The padded size of a batch of ``rows`` for a compiled or captured step, whose every new
    shape is a new compilation or capture: the smallest of 8, 12, 16, 24, 32, 48, ... (powers
    of two and one and a half times them) that holds ``rows``, so a batch is padded by under
    half its rows and ``batch_size`` from 8 to 1024 takes 15 sizes."""
    size = SMALLEST_BUCKET
    while True:
        for candidate in (size, size * 3 // 2):
            if candidate >= rows:
                return candidate
        size *= 2


def stacked_batch(batches: Sequence[Batch], agents: Sequence[str],
                  readers: Mapping[str, ObsReader], codecs: Mapping[str, ActionCodec],
                  device: torch.device, bucketed: bool = False
                  ) -> tuple[Tree, list[int], int]:
    """The members' batches joined row-wise and cleaned at once (:func:`clean_batch`'s rules
    act row by row), then as ``(K, rows, ...)`` per field: a reshape where every batch has
    ``rows`` rows, else each padded (:func:`pad`). ``rows`` is the largest batch's, or with
    ``bucketed`` its :func:`bucket`. Also each member's own number of rows, and ``rows``."""
    for x in batches:
        require_batch_keys(x, OFF_POLICY_FIELDS, agents)
    sizes = [len(x["active"][agents[0]]) for x in batches]
    rows_ = bucket(max(sizes)) if bucketed else max(sizes)
    clean = clean_batch(joined(batches), readers, codecs, device)
    return {f: {a: tree.map(lambda t: split(t, sizes, rows_), x)
                for a, x in getattr(clean, f).items() if x is not None}
            for f in FIELDS}, sizes, rows_


def joined(parts: Sequence[Any]) -> Any:
    """Like trees (batches, or tensors) joined row-wise: leaf by leaf a view where the parts
    are adjacent rows of one tensor (one update's batches of a buffer call's joined sample,
    :func:`~distmarl.runtime.actors.learner.replay_readouts`), else a copy."""
    if len(parts) == 1:
        return parts[0]
    return tree.map(lambda *xs: _join(xs), *parts)


def _join(parts: Sequence[Any]) -> Any:
    view = _adjacent(parts)
    return tree.concat(list(parts)) if view is None else view


def _adjacent(parts: Sequence[Any]) -> torch.Tensor | None:
    """One view of ``parts`` where they are contiguous tensors of one storage, each starting
    where the one before ends (else None)."""
    first = parts[0]
    if not all(isinstance(p, torch.Tensor) and p.is_contiguous() for p in parts):
        return None
    storage, offset = first.untyped_storage().data_ptr(), first.storage_offset()
    for p in parts:
        if (p.untyped_storage().data_ptr() != storage or p.storage_offset() != offset
                or p.dtype != first.dtype or p.shape[1:] != first.shape[1:]):
            return None
        offset += p.numel()
    shape = (sum(int(p.shape[0]) for p in parts), *first.shape[1:])
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * int(shape[i + 1])
    return first.as_strided(shape, strides, first.storage_offset())


def pad(x: torch.Tensor, rows_: int) -> torch.Tensor:
    """``x`` ``(B, ...)`` with ``rows_ - B`` more rows: zeros, or True for a bool mask (every
    action legal, so a padded row's logits stay finite)."""
    if x.shape[0] == rows_:
        return x
    fill = torch.ones if x.dtype == torch.bool else torch.zeros
    return torch.cat([x, fill((rows_ - x.shape[0], *x.shape[1:]), dtype=x.dtype,
                              device=x.device)])


def split(x: torch.Tensor | None, sizes: Sequence[int], rows_: int) -> torch.Tensor | None:
    """``(sum(sizes), ...)`` rows as ``(K, rows_, ...)``: member ``k``'s rows padded
    (:func:`pad`) and stacked, or only reshaped where every size is ``rows_``."""
    if x is None:
        return None
    if all(s == rows_ for s in sizes):
        return x.reshape(len(sizes), rows_, *x.shape[1:])
    if len(sizes) == 1:
        return pad(x, rows_).unsqueeze(0)
    return torch.stack([pad(part, rows_) for part in torch.split(x, list(sizes))])


def read_results(outs: Sequence[Tree], dues: Sequence[Sequence[bool]], sizes: Sequence[int],
                 banks: Sequence[Bank], agents: Sequence[str], members: int) -> list[Result]:
    """Per member, each update's metrics (``loss/<network>``; a member whose actor update
    was not due has no actor losses) and its rows' priorities (its own ``sizes[k]`` rows),
    read from the device in one go. ``outs``: each update's step outputs (per bank, the
    critics' losses ``(K, R, n)`` and the actors' ``(K, n)``; the priorities ``(K, B, 1)``);
    ``dues[u][k]``: whether member ``k``'s actor update ``u`` was due."""
    K = members
    names = [f"loss/{n}" for bank in banks if bank.kind == "critic" for n in bank.nets]
    names += [f"loss/actor/{a}" for bank in banks if bank.kind == "actor" for a in bank.agents]
    critics = len(names) - len(agents)
    device = outs[0]["critic"][0].device if outs else torch.device("cpu")
    idle = torch.full((K, len(agents)), float("nan"), device=device)
    read = torch.stack([torch.cat([x.reshape(K, -1) for x in o["critic"]]
                                  + ([x.reshape(K, -1) for x in o["actor"]]
                                     if o["actor"] else [idle]), dim=1)
                        for o in outs]).cpu().tolist()  # (U, K, networks)
    with_priorities = bool(outs) and "priorities" in outs[0]
    if with_priorities:
        priorities = torch.stack([o["priorities"] for o in outs], dim=1).cpu()  # (K, U, B, 1)
    results: list[Result] = []
    for k in range(K):
        metrics = [dict(zip(names if dues[u][k] else names[:critics], read[u][k],
                            strict=False)) for u in range(len(outs))]
        results.append((metrics, priorities[k, :, :sizes[k]].reshape(-1).numpy()
                        if with_priorities else None))
    return results
