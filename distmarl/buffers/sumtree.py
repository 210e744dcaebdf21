"""A sum-tree over a power-of-two number of leaves, its loops compiled with numba.

``tree[1]`` is the total, ``tree[i] = tree[2i] + tree[2i+1]``, leaf ``k`` at
``tree[leaves + k]``. A search or an update walks one root-to-leaf path per value: a loop of
``log2(leaves)`` steps that numpy can only run as that many whole-array passes (each a
Python-level call), so the loops are compiled; ``cache=True`` keeps the machine code beside the
module, so only the first process on a machine pays the compile. numba itself is imported with
the first tree (:func:`_kernels`): most processes that import the buffer package (rollout
workers, learners) never hold a tree, and numba's import costs each of them a large share of
its start-up.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import numpy as np

#: the compiled ``_set`` / ``_find``, which the compiled ``_update`` / ``_draw`` call (bound by
#: :func:`_kernels`; numba resolves a global at compile time)
_set_c: Any = None
_find_c: Any = None


def _set(tree: np.ndarray, leaves: int, positions: np.ndarray, values: np.ndarray,
         alpha: float) -> None:
    # Every leaf first (``values ** alpha``, 0 stays 0), then each level's parents over the
    # positions (independent loads, as in _find). Positions mostly arrive sorted (stratified
    # draws come out in leaf order), so a parent equal to the one before is skipped: near the
    # root most are. One that repeats out of order is summed again, to the same result.
    idx = positions + leaves
    for j in range(len(idx)):
        v = values[j]
        tree[idx[j]] = v ** alpha if v > 0.0 else 0.0
    n = len(idx)
    width = leaves
    while width > 1 and n > 0:
        m = 0
        last = -1
        for j in range(n):
            i = idx[j] >> 1
            if i != last:
                tree[i] = tree[2 * i] + tree[2 * i + 1]
                idx[m] = i
                m += 1
                last = i
        n = m
        width >>= 1


def _update(tree: np.ndarray, raw: np.ndarray, leaves: int, indices: np.ndarray,
            errors: np.ndarray, oldest: int, synced: int, eps: float, alpha: float
            ) -> tuple[int, float]:
    # The rows still stored and entered (oldest <= g < synced) take |error| + eps; returns
    # how many, and the largest priority set (0 if none).
    cap = len(raw)
    positions = np.empty(len(indices), dtype=np.int64)
    values = np.empty(len(indices))
    n = 0
    largest = 0.0
    for j in range(len(indices)):
        g = indices[j]
        if oldest <= g < synced:
            p = abs(errors[j]) + eps
            positions[n] = g % cap
            values[n] = p
            raw[g % cap] = p
            largest = max(largest, p)
            n += 1
    _set_c(tree, leaves, positions[:n], values[:n], alpha)
    return n, largest


def _find(tree: np.ndarray, leaves: int, prefix: np.ndarray) -> np.ndarray:
    # Level by level over all values rather than value by value down the tree: the loads of
    # one level are independent, so the CPU overlaps their cache misses. Branch-free steps:
    # the branch would be a coin flip the CPU mispredicts.
    n = len(prefix)
    u = prefix.copy()
    idx = np.ones(n, dtype=np.int64)
    width = 1
    while width < leaves:
        for j in range(n):
            i = idx[j]
            left = tree[2 * i]
            right = np.int64((u[j] >= left) & (tree[2 * i + 1] > 0.0))
            u[j] -= left * right
            idx[j] = 2 * i + right
        width *= 2
    return idx - leaves


def _draw(tree: np.ndarray, leaves: int, uniforms: np.ndarray, beta: float
          ) -> tuple[np.ndarray, np.ndarray]:
    # One value per equal slice of the total, found as in _find; weights relative to the
    # least likely leaf drawn.
    n = len(uniforms)
    total = tree[1]
    step = total / n
    prefix = np.empty(n)
    for j in range(n):
        prefix[j] = min((j + uniforms[j]) * step, total * (1.0 - 1e-12))
    pos = _find_c(tree, leaves, prefix)
    weights = np.empty(n, dtype=np.float32)
    least = np.inf
    for j in range(n):
        least = min(least, tree[leaves + pos[j]])
    b = np.float32(-beta)
    for j in range(n):  # float32 pow: half the cost of float64's, and weights are float32
        weights[j] = np.float32(tree[leaves + pos[j]] / least) ** b
    return pos, weights


@functools.cache
def _kernels() -> Any:
    """The compiled loops (numba imported here, once per process). Compiled in dependency
    order: ``_update`` calls ``_set`` and ``_draw`` calls ``_find`` through the globals bound
    here, so each nopython function calls a compiled one."""
    import numba

    global _set_c, _find_c
    jit = numba.njit(cache=True, nogil=True)
    _set_c, _find_c = jit(_set), jit(_find)
    return SimpleNamespace(set=_set_c, find=_find_c, update=jit(_update), draw=jit(_draw))


class SumTree:
    """Sums of non-negative leaf values; updates and searches take whole index arrays."""

    def __init__(self, capacity: int) -> None:
        self.leaves = 1 << max(0, int(capacity) - 1).bit_length()
        self.tree = np.zeros(2 * self.leaves, dtype=np.float64)
        self._k = _kernels()

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def set(self, positions: np.ndarray, values: np.ndarray, alpha: float = 1.0) -> None:
        """Leaves at ``positions`` take ``values ** alpha`` (0 stays 0; a repeated position
        keeps its last value)."""
        self._k.set(self.tree, self.leaves, np.ascontiguousarray(positions, dtype=np.int64),
             np.ascontiguousarray(values, dtype=np.float64), float(alpha))

    def rebuild(self, leaf_values: np.ndarray) -> None:
        """Every leaf at once (``leaf_values`` of length ``leaves``), summing level by level."""
        self.tree[self.leaves:] = leaf_values
        level = self.leaves
        while level > 1:
            parent = level // 2
            self.tree[parent:level] = self.tree[level:2 * level:2] + self.tree[level + 1:2 * level:2]
            level = parent

    def update(self, raw: np.ndarray, indices: np.ndarray, errors: np.ndarray, oldest: int,
               synced: int, eps: float, alpha: float) -> tuple[int, float]:
        """Priorities ``|errors| + eps`` into ``raw`` (one per ring position, ``capacity``
        long) and the leaves, for the global ``indices`` with ``oldest <= g < synced``;
        returns how many and the largest set (0 if none)."""
        n, largest = self._k.update(self.tree, raw, self.leaves,
                             np.ascontiguousarray(indices, dtype=np.int64),
                             np.ascontiguousarray(errors, dtype=np.float64).reshape(-1),
                             int(oldest), int(synced), float(eps), float(alpha))
        return int(n), float(largest)

    def draw(self, uniforms: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Stratified draws, one leaf per equal slice of the total (``uniforms`` in ``[0, 1)``
        place each in its slice), and their importance weights ``(P_i / P_min) ** -beta``
        over the drawn leaves (so at most 1)."""
        pos, weights = self._k.draw(self.tree, self.leaves,
                             np.ascontiguousarray(uniforms, dtype=np.float64), float(beta))
        return pos, weights

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each value ``u`` in ``[0, total)``, the leaf ``k`` whose cumulative range
        ``[sum(leaves < k), sum(leaves <= k))`` holds it. A value that float rounding carries
        past the last non-empty leaf stays in the non-empty part of the tree."""
        found: np.ndarray = self._k.find(self.tree, self.leaves,
                                  np.ascontiguousarray(prefix, dtype=np.float64))
        return found
