"""Nested observations as trees: one walk for every module that maps, stacks, joins, takes rows
of, or flattens them.

A tree is a leaf (an array, a tensor, a number, None) or a ``Mapping`` / ``tuple`` of trees:
an agent's observation from a ``Dict`` or ``Tuple`` space, a batch of them, a sample of the
buffer, a network's state. Dicts are walked in their keys' order (the first tree's) and come
back as plain ``dict``; tuples by position. Lists are leaves, except in :func:`map_all`.

Where several trees are walked together, a None in place of a subtree stands for that
subtree with None at every leaf (a member that draws nothing where another draws): the
structure comes from the first tree that is not None there. Trees are shallow here (an
observation's few keys), so plain recursion is as fast as a compiled pytree library, and
it needs no registration of types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Tree", "concat", "first_leaf", "flatten", "leaves", "map", "map_all", "prune",
           "stack", "take", "unflatten", "unstack"]

#: a leaf, or a Mapping / tuple of trees
Tree = Any
#: where a leaf sits: the keys and positions from the root
Path = tuple[Any, ...]


def map(fn: Callable[..., Any], *trees: Tree) -> Tree:
    """``fn`` applied leaf by leaf over like trees (``fn(*leaves)``), in their structure.
    ValueError when two trees' tuples differ in length; KeyError for a missing key."""
    first = trees[0]
    if first is None and len(trees) > 1:
        first = next((t for t in trees if t is not None), None)
    if isinstance(first, Mapping):
        return {k: map(fn, *(None if t is None else t[k] for t in trees)) for k in first}
    if isinstance(first, tuple):
        n = len(first)
        if any(t is not None and len(t) != n for t in trees):
            raise ValueError(f"tuples of lengths {[len(t) for t in trees if t is not None]} "
                             "cannot be walked together")
        return tuple(map(fn, *(None if t is None else t[i] for t in trees)) for i in range(n))
    return fn(*trees)


def map_all(fn: Callable[[Any], Any], tree: Tree) -> Tree:
    """:func:`map` of one tree whose lists and tuples are both walked (each kept as its
    type): state dicts, results to move between devices."""
    if isinstance(tree, Mapping):
        return {k: map_all(fn, v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(map_all(fn, v) for v in tree)
    return fn(tree)


def flatten(tree: Tree, path: Path = ()) -> tuple[Any, list[tuple[Path, Any]]]:
    """``(structure, [(path, leaf), ...])``: the structure with None at every leaf (dicts and
    tuples as in ``tree``) and the leaves in a fixed order with where they sit."""
    if isinstance(tree, Mapping):
        structure: dict[Any, Any] = {}
        out: list[tuple[Path, Any]] = []
        for key in tree:
            structure[key], sub = flatten(tree[key], (*path, key))
            out.extend(sub)
        return structure, out
    if isinstance(tree, tuple):
        parts, out = [], []
        for i, item in enumerate(tree):
            part, sub = flatten(item, (*path, i))
            parts.append(part)
            out.extend(sub)
        return tuple(parts), out
    return None, [(path, tree)]


def unflatten(structure: Any, leaves: Sequence[Any]) -> Tree:
    """The inverse of :func:`flatten`: ``structure`` with its None leaves replaced, in order,
    by ``leaves``."""
    it = iter(leaves)
    return map(lambda _: next(it), structure)


def leaves(tree: Tree) -> list[Any]:
    """The leaves of ``tree`` in :func:`flatten`'s order."""
    return [leaf for _, leaf in flatten(tree)[1]]


def first_leaf(tree: Tree) -> Any:
    """The first leaf (e.g. to read a batch's rows off any part of it)."""
    while isinstance(tree, Mapping | tuple):
        tree = next(iter(tree.values())) if isinstance(tree, Mapping) else tree[0]
    return tree


def prune(tree: Tree) -> Tree:
    """``tree`` without the dict entries whose value is None (``torch.func.vmap`` maps
    tensors only: a missing key reads as "nothing there")."""
    if isinstance(tree, Mapping):
        return {k: prune(v) for k, v in tree.items() if v is not None}
    if isinstance(tree, tuple):
        return tuple(prune(v) for v in tree)
    return tree


def _joined(parts: Sequence[Any], axis: int, stacked: bool) -> Any:
    """NumPy's stack / concatenate when every part is an array, else torch's over tensors
    of them (torch is imported only then: buffer and env processes never need it)."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return (np.stack if stacked else np.concatenate)(parts, axis=axis)
    import torch

    return (torch.stack if stacked else torch.cat)([torch.as_tensor(p) for p in parts],
                                                   dim=axis)


def stack(trees: Sequence[Tree], axis: int = 0) -> Tree:
    """Like trees stacked leaf by leaf along a new ``axis`` (NumPy where every leaf is an
    array, else torch)."""
    return map(lambda *xs: _joined(xs, axis, stacked=True), *trees)


def concat(trees: Sequence[Tree], axis: int = 0) -> Tree:
    """Like trees joined leaf by leaf along ``axis`` (rows, by default; NumPy where every
    leaf is an array, else torch)."""
    return map(lambda *xs: _joined(xs, axis, stacked=False), *trees)


def take(tree: Tree, index: Any) -> Tree:
    """Rows ``index`` (an int, slice, index array or tuple of them) of every leaf (arrays
    and tensors as they are, anything else as an array)."""
    return map(lambda x: (x if hasattr(x, "shape") else np.asarray(x))[index], tree)


def unstack(tree: Tree, n: int) -> list[Tree]:
    """The ``n`` trees whose leaves are the rows of ``tree``'s: ``[take(tree, i) ...]``."""
    return [map(lambda x, i=i: x[i], tree) for i in range(n)]
