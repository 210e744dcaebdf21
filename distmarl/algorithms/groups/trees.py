"""Stacking the members' trees (dicts of tensors) along a leading member axis, for vmap."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.func import vmap

from distmarl import tree
from distmarl.algorithms.common.stacked_adam import Params


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


def member_grads(loss: Callable[..., tuple[torch.Tensor, Any]]
                 ) -> Callable[..., tuple[dict[str, Params], Any]]:
    """``loss(params, *args) -> (scalar, aux)`` of one member, made into
    ``(params, *args) -> (grads, aux)`` over stacked members: ``params`` (name -> name ->
    ``(K, ...)``) and ``args`` with a leading member axis; ``grads`` as ``params``, each
    member's own gradient.

    The members' losses are computed with ``vmap`` and differentiated together: no member's
    parameters appear in another member's loss, so the gradient of their sum is each member's
    own. (``torch.func.grad`` would give the same, but its first call imports
    ``torch._dynamo``, seconds of start-up in every learner process.) ``params`` may instead
    be one member's own networks (name -> module), for a stack of one: ``loss`` then gets the
    modules and the other arguments without their member axis, and the gradients get one."""
    mapped = vmap(loss)

    def alone(params: dict[str, Params], *args: Any) -> tuple[torch.Tensor, Any]:
        """One member's loss called on its slot (no vmap), its outputs given the member axis."""
        total, aux = loss(*(tree.map(lambda x: None if x is None else x[0], a)
                            for a in (params, *args)))
        return total.unsqueeze(0), tree.map(lambda x: None if x is None else x.unsqueeze(0), aux)

    def own_networks(modules: dict[str, torch.nn.Module], *args: Any
                     ) -> tuple[dict[str, Params], Any]:
        """A stack of one on its member's own networks (whose parameters alias the slot):
        ``loss`` calls the modules, and their parameters are the leaves differentiated."""
        named = {n: dict(m.named_parameters()) for n, m in modules.items()}
        with torch.enable_grad():
            total, aux = loss(modules, *(tree.map(_first_member, a) for a in args))
            flat = [p for ps in named.values() for p in ps.values()]
            found = iter(torch.autograd.grad(total, flat))
        aux = tree.map(lambda x: None if x is None else x.detach().unsqueeze(0), aux)
        return {n: {k: next(found).unsqueeze(0) for k in ps} for n, ps in named.items()}, aux

    def grads(params: dict[str, Params], *args: Any) -> tuple[dict[str, Params], Any]:
        if isinstance(next(iter(params.values())), torch.nn.Module):
            return own_networks(params, *args)  # type: ignore[arg-type]
        leaves = {n: {k: p.detach().requires_grad_(True) for k, p in ps.items()}
                  for n, ps in params.items()}
        members = tree.first_leaf(leaves).shape[0]
        with torch.enable_grad():
            total, aux = (alone if members == 1 else mapped)(leaves, *args)
            flat = [p for ps in leaves.values() for p in ps.values()]
            found = iter(torch.autograd.grad(total.sum(), flat))
        aux = tree.map(lambda x: None if x is None else x.detach(), aux)
        return {n: {k: next(found) for k in ps} for n, ps in leaves.items()}, aux

    return grads


def _first_member(x: Any) -> Any:
    """A stacked tensor's first member; anything else (None, a module) as it is."""
    return x[0] if isinstance(x, torch.Tensor) else x
