"""Stacking the members' trees (dicts of tensors) along a leading member axis, for vmap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from distmarl import tree
from distmarl.algorithms.groups.adam import Params


def stack_params(params: Sequence[Mapping[str, torch.Tensor]]) -> Params:
    return {k: torch.stack([p[k].detach() for p in params]).contiguous() for k in params[0]}


def stack_tree(items: Sequence[Any]) -> Any:
    """Stack a list of like trees (dicts of tensors) leaf by leaf along a new axis 0; a leaf
    that is None in every tree stays None, one that is None in some is zeros there (a member
    that draws nothing where another draws)."""
    return tree.map(_stack_present, *items)


def _stack_present(*xs: torch.Tensor | None) -> torch.Tensor | None:
    first = next((x for x in xs if x is not None), None)
    if first is None:
        return None
    return torch.stack([torch.zeros_like(first) if x is None else x for x in xs])
