"""Column schema of a multi-agent buffer: which arrays exist, with which shapes and dtypes.

A transition is ``field -> agent -> value``; a value is an array or, for structured
observations, a dict / tuple of arrays. Each array leaf becomes one *column*: one preallocated
ring of shape ``(capacity, *shape)``. The schema is inferred from the first save and every later
save is checked against it, so a bad row is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distmarl import tree

#: A value's structure: ``None`` for an array leaf, else a dict (key -> structure) or a tuple.
Structure = Any
#: Where a leaf sits inside a value: dict keys and tuple positions, outermost first.
LeafPath = tuple[str | int, ...]
#: One array leaf of a value and its path.
Leaf = tuple[LeafPath, Any]


@dataclass(frozen=True)
class ColumnSpec:
    """One array leaf: ``agent``'s ``field`` at ``path`` inside a dict / tuple value.

    ``shape`` is the shape of one row (``()`` for scalars such as rewards).
    """

    agent: str
    field: str
    path: LeafPath
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def name(self) -> str:
        """Column name used in saved files: ``agent/field`` or ``agent/field/key``."""
        return "/".join([self.agent, self.field, *map(str, self.path)])

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "field": self.field,
            "path": list(self.path),
            "shape": list(self.shape),
            "dtype": self.dtype.str,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ColumnSpec:
        return ColumnSpec(
            agent=str(d["agent"]),
            field=str(d["field"]),
            path=tuple(d["path"]),
            shape=tuple(int(s) for s in d["shape"]),
            dtype=np.dtype(d["dtype"]),
        )


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a column stores for inputs of ``dtype``.

    float64 is stored as float32: learners compute in float32 and it halves the memory.
    Everything else (bool, integers, float16/32) is stored as it comes.
    """
    if dtype == np.float64:
        return np.dtype(np.float32)
    if dtype.kind not in "biuf":
        raise TypeError(f"dtype {dtype} cannot be stored in a replay buffer (numbers and bools only)")
    return dtype


def stack_values(values: Sequence[Any]) -> Any:
    """One agent's values of one field over ``n`` steps, stacked (AgileRL's
    ``stack_transitions`` contract): numbers and arrays -> ``(n, *shape)``, and a result of
    one dimension (scalars, shape-``()`` arrays) -> ``(n, 1)``; dict and tuple values are
    stacked per key / position (nested ones recursively). ValueError for an empty list."""
    if not values:
        raise ValueError("stack_transitions needs at least one transition")
    return tree.map(_stack_leaf, *values)


def _stack_leaf(*values: Any) -> np.ndarray:
    stacked = np.array([np.asarray(v) for v in values])
    return stacked[:, None] if stacked.ndim == 1 else stacked


def lookup(value: Any, path: LeafPath) -> Any:
    """``value[path[0]][path[1]]...``."""
    for key in path:
        value = value[key]
    return value


def structure_to_json(structure: Structure) -> Any:
    if structure is None:
        return None
    if isinstance(structure, dict):
        return {"dict": [[k, structure_to_json(v)] for k, v in structure.items()]}
    return {"tuple": [structure_to_json(v) for v in structure]}


def structure_from_json(obj: Any) -> Structure:
    if obj is None:
        return None
    if "dict" in obj:
        return {k: structure_from_json(v) for k, v in obj["dict"]}
    return tuple(structure_from_json(v) for v in obj["tuple"])


@dataclass
class BufferSchema:
    """Columns of every (agent, field), and the structure to rebuild each value from them."""

    field_names: tuple[str, ...]
    agent_ids: tuple[str, ...]
    columns: list[ColumnSpec] = field(default_factory=list)
    structures: dict[tuple[str, str], Structure] = field(default_factory=dict)

    @staticmethod
    def infer(
        field_names: Sequence[str],
        agent_ids: Sequence[str],
        values: Sequence[Mapping[str, Any]],
        vectorised: bool,
    ) -> BufferSchema:
        """Build the schema from one save: ``values[i][agent]`` is field ``i``'s value.

        With ``vectorised`` each leaf has a leading ``num_envs`` axis that is not part of a row.
        """
        schema = BufferSchema(tuple(field_names), tuple(agent_ids))
        for field_name, per_agent in zip(field_names, values, strict=True):
            for agent in agent_ids:
                structure, leaves = tree.flatten(per_agent[agent])
                schema.structures[(field_name, agent)] = structure
                for path, leaf in leaves:
                    arr = np.asarray(leaf)
                    shape = arr.shape[1:] if vectorised else arr.shape
                    spec = ColumnSpec(agent, field_name, path, shape, storage_dtype(arr.dtype))
                    schema.columns.append(spec)
        return schema

    def to_json(self) -> dict[str, Any]:
        return {
            "field_names": list(self.field_names),
            "agent_ids": list(self.agent_ids),
            "columns": [c.to_json() for c in self.columns],
            "structures": [
                [f, a, structure_to_json(s)] for (f, a), s in self.structures.items()
            ],
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> BufferSchema:
        return BufferSchema(
            field_names=tuple(d["field_names"]),
            agent_ids=tuple(d["agent_ids"]),
            columns=[ColumnSpec.from_json(c) for c in d["columns"]],
            structures={(f, a): structure_from_json(s) for f, a, s in d["structures"]},
        )
