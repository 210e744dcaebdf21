"""``state_dict`` / ``load_state_dict`` of :class:`MultiAgentReplayBuffer`.

A state is plain data: ``meta`` (JSON-able numbers, strings and lists: config, schema, counters,
consumer cursors, rate limiter and RNG state) and ``columns`` (one numpy array per column in
insertion order, plus ``member``). Checkpoints, buffer files and actor snapshots share this one
path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from distmarl.buffers.sampling import ConsumerState
from distmarl.buffers.schema import BufferSchema
from distmarl.buffers.storage import RingStorage

if TYPE_CHECKING:
    from distmarl.buffers.replay import MultiAgentReplayBuffer

STATE_VERSION = 1


def buffer_state(buf: MultiAgentReplayBuffer) -> dict[str, Any]:
    """Everything needed to rebuild ``buf`` exactly (copies, safe to mutate)."""
    columns: dict[str, np.ndarray] = {}
    if buf.storage is not None and buf.schema is not None:
        values, member = buf.storage.logical_columns()
        columns = {spec.name: v for spec, v in zip(buf.schema.columns, values, strict=True)}
        columns["__member__"] = member
    meta = {
        "version": STATE_VERSION,
        "config": buf.config(),
        "schema": None if buf.schema is None else buf.schema.to_json(),
        "counter": buf.counter,
        "consumers": {
            name: {"cursor": s.cursor, "received_new": s.received_new, "dropped": s.dropped}
            for name, s in buf.consumers.items()
        },
        "rate_limiter": None if buf.rate_limiter is None else buf.rate_limiter.state_dict(),
        "rng": buf.rng.bit_generator.state,
    }
    return {"meta": meta, "columns": columns}


def load_buffer_state(buf: MultiAgentReplayBuffer, state: Mapping[str, Any]) -> None:
    """Load ``state`` into ``buf``; checks everything first, so a bad state changes nothing."""
    meta = state["meta"]
    if meta.get("version") != STATE_VERSION:
        raise ValueError(f"buffer state version {meta.get('version')} is not {STATE_VERSION}")
    cfg = meta["config"]
    for key in ("field_names", "agent_ids"):
        if list(cfg[key]) != list(getattr(buf, key)):
            raise ValueError(f"buffer state has {key} {cfg[key]}, this buffer {getattr(buf, key)}")
    schema = None if meta["schema"] is None else BufferSchema.from_json(meta["schema"])
    columns = state["columns"]
    values: list[np.ndarray] = []
    member = np.zeros(0, dtype=np.int32)
    if schema is not None:
        member = np.asarray(columns["__member__"], dtype=np.int32)
        values = [_checked_column(columns, spec, len(member)) for spec in schema.columns]
    storage = None
    if schema is not None:
        storage = RingStorage(buf.memory_size, schema.columns)
        storage.restore(values, member, int(meta["counter"]))
    # everything checked: now change the buffer
    if schema is not None:
        buf._set_schema(schema)
    else:
        buf.schema = None
    buf.storage = storage
    buf.consumers = {name: ConsumerState(**c) for name, c in meta["consumers"].items()}
    if buf.rate_limiter is not None and meta["rate_limiter"] is not None:
        buf.rate_limiter.load_state_dict(meta["rate_limiter"])
    buf.rng.bit_generator.state = meta["rng"]


def _checked_column(columns: Mapping[str, np.ndarray], spec: Any, rows: int) -> np.ndarray:
    if spec.name not in columns:
        raise ValueError(f"buffer state has no column '{spec.name}'")
    arr = np.asarray(columns[spec.name])
    if arr.shape != (rows, *spec.shape) or arr.dtype != spec.dtype:
        raise ValueError(
            f"buffer state column '{spec.name}' has shape {arr.shape} dtype {arr.dtype}, "
            f"expected {(rows, *spec.shape)} {spec.dtype}"
        )
    return arr
