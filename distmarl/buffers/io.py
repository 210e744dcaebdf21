"""Buffer files: a buffer state as one Arrow table (IPC file, or Parquet by suffix).

One column per (agent, field[, key]) in insertion order, plus ``__member__``; a row of a
multi-dimensional field is a fixed-size list (its shape is in the schema), so pandas reads the
file as it is (``pyarrow.ipc.open_file(path).read_pandas()``). Counters, consumer cursors, the
schema and RNG state travel in the schema metadata under ``distmarl.buffer``. Files are data:
nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from distmarl.buffers.schema import BufferSchema
from distmarl.buffers.storage import MEMBER_COLUMN, PRIORITY_COLUMN

META_KEY = b"distmarl.buffer"


def _to_arrow(arr: np.ndarray) -> pa.Array:
    if arr.ndim == 1:
        return pa.array(arr)
    width = int(np.prod(arr.shape[1:]))
    flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, width)


def _from_arrow(col: pa.ChunkedArray, shape: tuple[int, ...], dtype: np.dtype, name: str,
                path: Path) -> np.ndarray:
    arr = col.combine_chunks()
    if shape:
        if not pa.types.is_fixed_size_list(arr.type):
            raise ValueError(f"buffer file {path}: column '{name}' is {arr.type}, "
                             f"expected a fixed-size list of {dtype} for shape {shape}")
        values = arr.flatten().to_numpy(zero_copy_only=False)
    else:
        values = arr.to_numpy(zero_copy_only=False)
    if values.dtype != dtype:
        raise ValueError(f"buffer file {path}: column '{name}' holds {values.dtype}, expected {dtype}")
    try:
        rows: np.ndarray = values.reshape(len(arr), *shape)
        return rows
    except ValueError:
        raise ValueError(f"buffer file {path}: column '{name}' rows do not have shape {shape}") from None


def write_state(state: dict[str, Any], path: Path) -> Path:
    """Write ``state`` (a ``MultiAgentReplayBuffer.state_dict()``) to ``path`` via a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = state["columns"]
    names = list(columns)
    table = pa.table({n: _to_arrow(columns[n]) for n in names}) if names else pa.table({})
    meta = json.dumps(state["meta"]).encode()
    table = table.replace_schema_metadata({META_KEY: meta})
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if path.suffix == ".parquet":
        pq.write_table(table, tmp)
    else:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    os.replace(tmp, path)
    return path


def read_state(path: Path) -> dict[str, Any]:
    """Read a buffer file back into a state; a clear ValueError names what does not fit."""
    if not path.exists():
        raise FileNotFoundError(f"buffer file {path} does not exist")
    try:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"buffer file {path} is not a readable Arrow/Parquet file: {err}") from None
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise ValueError(f"buffer file {path} has no '{META_KEY.decode()}' metadata: "
                         "it was not written by MultiAgentReplayBuffer.save")
    meta = json.loads(raw)
    columns: dict[str, np.ndarray] = {}
    if meta.get("schema") is not None:
        schema = BufferSchema.from_json(meta["schema"])
        priorities = [PRIORITY_COLUMN.format(name) for name in meta.get("priorities", {})]
        expected = {c.name for c in schema.columns} | {MEMBER_COLUMN} | set(priorities)
        missing = sorted(expected - set(table.column_names))
        unknown = sorted(set(table.column_names) - expected)
        if missing or unknown:
            raise ValueError(f"buffer file {path} has the wrong schema: missing columns {missing}, "
                             f"unknown columns {unknown}")
        for spec in schema.columns:
            columns[spec.name] = _from_arrow(table.column(spec.name), spec.shape, spec.dtype,
                                             spec.name, path)
        columns[MEMBER_COLUMN] = _from_arrow(table.column(MEMBER_COLUMN), (), np.dtype(np.int32),
                                             MEMBER_COLUMN, path)
        for name in priorities:
            columns[name] = _from_arrow(table.column(name), (), np.dtype(np.float64), name, path)
    return {"meta": meta, "columns": columns}
