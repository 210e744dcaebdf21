"""A chunk's rows, written step by step into arrays allocated once per field and agent.

Why not append each step's arrays and stack them at the end: the appended arrays live until the
chunk is stacked, interleaved on the C heap with the env's and torch's per-step temporaries
(rendered frames, resized copies, float conversions), so the heap cannot reuse or return the
temporaries' space. With pistonball's 20 agents and 64x64x4 frames a rollout worker's resident
memory grew by several times the fragment it held, and stacking copied the fragment once more.
Arrays of ``(num_steps, num_envs, ...)`` allocated at a field's first step hold the same data
once; the chunk hands them out as ``(num_steps * num_envs, ...)`` views (time-major).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distmarl import tree


class ChunkRows:
    """``num_steps`` steps of ``fields`` x ``agents``; :meth:`put` writes step ``t``'s value
    (an ``(E, ...)`` array, or a dict / tuple of them for structured observations)."""

    def __init__(self, fields: Sequence[str], agents: Sequence[str], num_steps: int) -> None:
        if num_steps < 1:
            raise ValueError(f"a chunk needs at least one step, got num_steps={num_steps}")
        self.num_steps = num_steps
        self.arrays: dict[str, dict[str, Any]] = {f: {a: None for a in agents} for f in fields}
        self.written = 0  # steps written so far (the highest t + 1)

    def put(self, t: int, field: str, agent: str, value: Any) -> Any:
        """Store ``value`` as step ``t`` of ``field`` for ``agent``; returns the stored row (a
        view: writing into it changes the chunk, as a pending ``next_value`` needs)."""
        per = self.arrays[field]
        if per[agent] is None:
            per[agent] = _allocate(value, self.num_steps)
        self.written = max(self.written, t + 1)
        return _write(per[agent], t, value)

    def data(self) -> dict[str, dict[str, Any]]:
        """Every field's rows ``(num_steps * num_envs, ...)``, time-major (row ``t * E + e``);
        every step must have been written."""
        if self.written != self.num_steps:
            raise ValueError(f"{self.written} of {self.num_steps} steps written")
        return {f: {a: tree.map(_steps_as_rows, v) for a, v in per.items()}
                for f, per in self.arrays.items()}


def _allocate(value: Any, num_steps: int) -> Any:
    """Room for ``num_steps`` values like ``value``: each leaf ``(num_steps, *shape)``."""
    def empty(x: Any) -> np.ndarray:
        arr = np.asarray(x)
        return np.empty((num_steps, *arr.shape), dtype=arr.dtype)

    return tree.map(empty, value)


def _write(store: Any, t: int, value: Any) -> Any:
    """``value`` as step ``t`` of ``store``; the stored rows (views)."""
    def put(rows: np.ndarray, x: Any) -> np.ndarray:
        rows[t] = x
        return rows[t]

    return tree.map(put, store, value)


def _steps_as_rows(rows: np.ndarray) -> np.ndarray:
    """``(T, E, ...)`` -> ``(T * E, ...)``, time-major."""
    return rows.reshape(rows.shape[0] * rows.shape[1], *rows.shape[2:])
