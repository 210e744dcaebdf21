"""How a buffer's values map to its columns: checking saves, reassembling sampled rows.

A save is one ``agent -> value`` mapping per field, in the buffer's field order. A
:class:`ColumnLayout` binds a :class:`~distmarl.buffers.schema.BufferSchema` to that order: it
turns a save into the arrays to write (one per column, ``(n, *column_shape)``), refusing any
save that differs from the schema with an error naming the agent and field, and turns sampled
columns back into ``field -> agent -> value``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from distmarl.buffers.schema import BufferSchema, ColumnSpec, LeafPath, lookup
from distmarl.tree import flatten, unflatten

_SHAPE = attrgetter("shape")
_DTYPE = attrgetter("dtype")
#: The shape of one row of a column.
Shape = tuple[int, ...]
#: A column as a save is checked against it: (field index, agent, path in the value, row
#: shape, storage dtype, input dtypes accepted so far, spec).
_Column = tuple[int, str, LeafPath, Shape, np.dtype, set[np.dtype], ColumnSpec]


def check_mappings(field_names: Sequence[str], agent_ids: Sequence[str],
                   values: Sequence[Any]) -> None:
    """ValueError unless ``values`` holds one ``agent -> value`` mapping per field with exactly
    ``agent_ids`` as keys."""
    if len(values) != len(field_names):
        raise ValueError(f"expected {len(field_names)} fields {list(field_names)}, got {len(values)}")
    agent_set = set(agent_ids)
    for name, per_agent in zip(field_names, values, strict=True):
        if not isinstance(per_agent, Mapping):
            raise ValueError(
                f"field '{name}' must be a dict agent_id -> value, got {type(per_agent).__name__}"
            )
        if per_agent.keys() != agent_set:
            missing = sorted(agent_set - per_agent.keys())
            unknown = sorted(set(per_agent) - agent_set)
            raise ValueError(
                f"field '{name}': agent ids do not match the buffer's agent_ids "
                f"{list(agent_ids)}: missing {missing}, unknown {unknown}"
            )


class ColumnLayout:
    """A schema bound to its field order: saves -> column arrays, sampled columns -> values.

    :param schema: the columns; its ``field_names`` / ``agent_ids`` give the order of a save.
    """

    def __init__(self, schema: BufferSchema) -> None:
        self.schema = schema
        self.field_names = list(schema.field_names)
        self.agent_ids = list(schema.agent_ids)
        self._agent_set = frozenset(self.agent_ids)
        field_index = {f: i for i, f in enumerate(self.field_names)}
        self._columns: list[_Column] = [
            (field_index[c.field], c.agent, c.path, c.shape, c.dtype, {c.dtype}, c)
            for c in schema.columns
        ]
        self._structured = [
            (field_index[name], agent, structure)
            for (name, agent), structure in schema.structures.items() if structure is not None
        ]
        #: True when no value is a dict / tuple: :meth:`fast_arrays` can take a save as it is.
        self.fast_path = not self._structured
        self._fast_keys = [(field_index[c.field], c.agent) for c in schema.columns]
        self._fast_agent_counts = [len(self.agent_ids)] * len(self.field_names)
        self._fast_shapes: dict[int, list[Shape]] = {}  # num_envs -> expected array shapes
        first_dtypes = [c.dtype for c in schema.columns]
        self._first_dtypes = first_dtypes
        self._fast_dtypes: set[tuple[np.dtype, ...]] = {tuple(first_dtypes)}
        # per field, per agent: (agent, structure, indices of its columns)
        self._assembly = [
            [(agent, schema.structures[(name, agent)],
              [i for i, c in enumerate(schema.columns) if c.field == name and c.agent == agent])
             for agent in self.agent_ids]
            for name in self.field_names
        ]

    def fast_arrays(self, values: Sequence[Mapping[str, Any]]) -> list[np.ndarray] | None:
        """The hot path for well-formed vectorised saves of numpy arrays: a few list
        comparisons done in C. None when anything looks off; :meth:`prepare` then finds (and
        names) the problem, or accepts a castable dtype, which later calls accept here too."""
        try:
            if list(map(len, values)) != self._fast_agent_counts:
                return None
            arrays = [values[fi][agent] for fi, agent in self._fast_keys]
            shapes = list(map(_SHAPE, arrays))
            expected = self._fast_shapes.get(shapes[0][0])
            if expected is None:
                expected = self._fast_shapes.setdefault(
                    shapes[0][0], [(shapes[0][0], *c.shape) for c in self.schema.columns])
            if shapes != expected:
                return None
            dtypes = list(map(_DTYPE, arrays))  # list == compares by identity first: cheap
            if dtypes != self._first_dtypes and tuple(dtypes) not in self._fast_dtypes:
                return None
        except (KeyError, TypeError, IndexError, AttributeError):
            return None
        return arrays

    def prepare(self, values: Sequence[Any], vectorised: bool) -> tuple[list[np.ndarray], int]:
        """Check every leaf against the schema and return the arrays to write, ``(n, *shape)``,
        and ``n``. Without ``vectorised`` a value is one row (no leading axis)."""
        self._check_keys(values)
        out: list[np.ndarray] = []
        for fi, agent, path, shape, dtype, ok_dtypes, spec in self._columns:
            value = values[fi][agent]
            arr = np.asarray(_leaf(value, spec) if path else value)
            if not vectorised:
                if arr.shape != shape:
                    raise ValueError(_shape_error(spec, arr.shape, shape))
                arr = arr[None]
            elif arr.shape[1:] != shape or arr.ndim == 0:
                raise ValueError(_shape_error(spec, arr.shape, ("num_envs", *shape)))
            if arr.dtype not in ok_dtypes:
                _accept_dtype(arr.dtype, dtype, ok_dtypes, spec)
            out.append(arr)
        n = self._common_rows(out)
        if self._structured:
            self._check_structures(values)
        self._fast_dtypes.add(tuple(a.dtype for a in out))
        return out, n

    def assemble(self, columns: Sequence[np.ndarray]) -> tuple[dict[str, Any], ...]:
        """Sampled columns (schema order, ``(batch, *shape)``) -> a tuple in field order of
        ``agent -> value``; scalar columns become ``(batch, 1)``."""
        out = []
        for per_field in self._assembly:
            d = {}
            for agent, structure, idx in per_field:
                leaves = [c if c.ndim > 1 else c[:, None] for c in (columns[i] for i in idx)]
                d[agent] = leaves[0] if structure is None else unflatten(structure, leaves)
            out.append(d)
        return tuple(out)

    def _check_keys(self, values: Sequence[Any]) -> None:
        """:func:`check_mappings`, run only when a quick look finds something off."""
        if len(values) != len(self.field_names) or any(
            not isinstance(v, Mapping) or v.keys() != self._agent_set for v in values
        ):
            check_mappings(self.field_names, self.agent_ids, values)

    def _common_rows(self, arrays: Sequence[np.ndarray]) -> int:
        """The row count every array shares, else ValueError naming two that disagree."""
        n = arrays[0].shape[0] if arrays else 0
        for arr, column in zip(arrays, self._columns, strict=True):
            if arr.shape[0] != n:
                first, spec = self._columns[0][-1], column[-1]
                raise ValueError(
                    f"agents disagree on num_envs: agent '{first.agent}' field "
                    f"'{first.field}' has shape {arrays[0].shape} but agent '{spec.agent}' "
                    f"field '{spec.field}' has shape {arr.shape}"
                )
        return int(n)

    def _check_structures(self, values: Sequence[Mapping[str, Any]]) -> None:
        """Structured (dict / tuple) values must keep the first save's keys exactly."""
        for fi, agent, structure in self._structured:
            got = flatten(values[fi][agent])[0]
            if got != structure:
                raise ValueError(
                    f"agent '{agent}' field '{self.field_names[fi]}': structure {got} differs "
                    f"from the first save's {structure}"
                )


def _accept_dtype(got: np.dtype, stored: np.dtype, accepted: set[np.dtype],
                  spec: ColumnSpec) -> None:
    """Add ``got`` to a column's ``accepted`` input dtypes if it casts safely to ``stored``,
    else ValueError naming the column."""
    if not np.can_cast(got, stored, "same_kind"):
        raise ValueError(
            f"agent '{spec.agent}' field '{spec.name.split('/', 1)[1]}': dtype "
            f"{got} cannot be stored in a {stored} column (first save's dtype)"
        )
    accepted.add(got)


def _leaf(value: Any, spec: ColumnSpec) -> Any:
    try:
        return lookup(value, spec.path)
    except (KeyError, IndexError, TypeError) as err:
        raise ValueError(
            f"agent '{spec.agent}' field '{spec.field}': value has no entry {list(spec.path)} "
            f"({err!r}); its structure differs from the first save"
        ) from None


def _shape_error(spec: ColumnSpec, got: Shape, expected: tuple[int | str, ...]) -> str:
    return (
        f"agent '{spec.agent}' field '{spec.name.split('/', 1)[1]}': shape {tuple(got)} does "
        f"not match {tuple(expected)} (from the first save)"
    )
