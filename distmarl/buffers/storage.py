"""Preallocated ring storage: one numpy array per column, all sharing one write position.

Global row ``g`` (the ``g``-th row ever added, ``0 <= g < counter``) lives at position
``g % capacity`` while it is stored, that is while ``counter - size <= g``. Deriving the position
from the global index keeps every column, every agent and the member tags aligned by
construction, and lets consumers keep plain integer cursors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.buffers.schema import ColumnSpec

#: Member tag of rows that belong to no population member.
NO_MEMBER = -1
#: Name of the member-tag column in a storage state (and in buffer files).
MEMBER_COLUMN = "__member__"
#: Name of a consumer's priority column (one per stored row) in a buffer state and file.
PRIORITY_COLUMN = "__priority__/{}"


class RingStorage:
    """Columns of shape ``(capacity, *spec.shape)`` plus an int32 member tag per row."""

    def __init__(self, capacity: int, columns: Sequence[ColumnSpec]) -> None:
        if capacity <= 0:
            raise ValueError(f"memory_size must be a positive number of rows, got {capacity}")
        self.capacity = int(capacity)
        self.specs = list(columns)
        # np.zeros maps zeroed pages lazily: memory is only touched as rows are written.
        self.arrays = [np.zeros((self.capacity, *s.shape), dtype=s.dtype) for s in self.specs]
        self.member = np.full(self.capacity, NO_MEMBER, dtype=np.int32)
        self.counter = 0  # rows ever added
        self.size = 0  # rows stored now
        # Until a tagged row is written every tag is NO_MEMBER, and untagged writes can skip
        # the tag column (the common single-process case saves one array write per call).
        self._tagged = False

    @property
    def oldest(self) -> int:
        """Global index of the oldest stored row."""
        return self.counter - self.size

    def nbytes(self) -> int:
        """Bytes held by the preallocated arrays (the whole capacity)."""
        return sum(a.nbytes for a in self.arrays) + self.member.nbytes

    def write(self, values: Sequence[np.ndarray], n: int, member: int | None) -> None:
        """Append ``n`` rows; ``values[c]`` has shape ``(n, *specs[c].shape)``, already checked.

        When ``n`` exceeds the capacity only the last ``capacity`` rows are kept, exactly as if
        they had been written one by one.
        """
        cap = self.capacity
        tag = NO_MEMBER if member is None else int(member)
        start = self.counter % cap
        stop = start + n
        if stop <= cap:  # the common case: one contiguous slice per column
            rows = slice(start, stop)
            for arr, val in zip(self.arrays, values, strict=True):
                arr[rows] = val
            if self._tagged or tag != NO_MEMBER:
                self._tagged = True
                self.member[rows] = tag
        else:
            self._write_wrapped(values, n, tag)
        self.counter += n
        self.size = cap if self.size + n >= cap else self.size + n

    def _write_wrapped(self, values: Sequence[np.ndarray], n: int, tag: int) -> None:
        cap = self.capacity
        skip = max(0, n - cap)
        start = (self.counter + skip) % cap
        count = n - skip
        first = min(count, cap - start)
        for arr, val in zip(self.arrays, values, strict=True):
            val = val[skip:]
            arr[start : start + first] = val[:first]
            arr[: count - first] = val[first:]
        self._tagged = self._tagged or tag != NO_MEMBER
        self.member[start : start + first] = tag
        self.member[: count - first] = tag

    def positions(self, global_indices: np.ndarray) -> np.ndarray:
        return global_indices % self.capacity

    def gather(self, global_indices: np.ndarray) -> list[np.ndarray]:
        """Rows at ``global_indices`` (all stored), one array per column, in column order."""
        pos = self.positions(global_indices)
        return [arr.take(pos, axis=0) for arr in self.arrays]

    def members_of(self, global_indices: np.ndarray) -> np.ndarray:
        return self.member.take(self.positions(global_indices))

    def stored_indices(self) -> np.ndarray:
        """Global indices of all stored rows, oldest first."""
        return np.arange(self.oldest, self.counter, dtype=np.int64)

    def logical_columns(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Copies of every stored row in insertion order (oldest first), and their member tags."""
        idx = self.stored_indices()
        return self.gather(idx), self.members_of(idx)

    def state_dict(self) -> dict[str, Any]:
        """``counter`` (rows ever added) and ``columns``: a copy of every stored row in insertion
        order, ``{spec.name: (size, *spec.shape)}`` plus ``MEMBER_COLUMN: (size,) int32``."""
        values, member = self.logical_columns()
        columns = {spec.name: v for spec, v in zip(self.specs, values, strict=True)}
        columns[MEMBER_COLUMN] = member
        return {"counter": self.counter, "columns": columns}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the contents with a :meth:`state_dict` of storage with the same columns.

        Every column is checked against ``specs`` first, so a bad state changes nothing. More
        rows than the capacity (a state of a larger buffer) keep the newest ``capacity`` rows.
        """
        columns = state["columns"]
        member = np.asarray(columns[MEMBER_COLUMN], dtype=np.int32)
        values = [_checked_column(columns, spec, len(member)) for spec in self.specs]
        self._restore(values, member, int(state["counter"]))

    def _restore(self, values: Sequence[np.ndarray], member: np.ndarray, counter: int) -> None:
        """Replace the contents with rows ``counter - n .. counter - 1`` given oldest first."""
        n = len(member)
        keep = min(n, self.capacity)
        pos = np.arange(counter - keep, counter, dtype=np.int64) % self.capacity
        for arr, val in zip(self.arrays, values, strict=True):
            arr[pos] = val[n - keep :]
        self.member[pos] = member[n - keep :]
        self._tagged = bool((self.member != NO_MEMBER).any())
        self.counter = int(counter)
        self.size = keep


def _checked_column(columns: Mapping[str, Any], spec: ColumnSpec, rows: int) -> np.ndarray:
    """``columns[spec.name]`` as an array of shape ``(rows, *spec.shape)`` and ``spec.dtype``,
    else ValueError naming the column."""
    if spec.name not in columns:
        raise ValueError(f"buffer state has no column '{spec.name}'")
    arr = np.asarray(columns[spec.name])
    if arr.shape != (rows, *spec.shape) or arr.dtype != spec.dtype:
        raise ValueError(
            f"buffer state column '{spec.name}' has shape {arr.shape} dtype {arr.dtype}, "
            f"expected {(rows, *spec.shape)} {spec.dtype}"
        )
    return arr
