"""``MultiAgentReplayBuffer``: AgileRL's multi-agent buffer API on preallocated numpy rings.

Usage (one env step at a time, or a whole vectorised step)::

    buf = MultiAgentReplayBuffer(100_000, ["obs", "action", "reward", "next_obs", "done"],
                                 agent_ids=["speaker_0", "listener_0"], replay_ratio=0.5)
    buf.save_to_memory(obs, action, reward, next_obs, done, is_vectorised=True)  # (num_envs, ...)
    batch = buf.sample(256, consumer="learner-0")  # tuple in field order, agent -> tensor

Extensions over AgileRL: rows tagged with a population ``member``; per-consumer mix-in of new
rows (``replay_ratio``); ``learning_starts``; a samples-per-insert rate limiter; state_dict and
Arrow files. A bad save raises ``ValueError`` before any row is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from distmarl.buffers.sampling import (
    ConsumerState,
    SampleToInsertRatio,
    new_row_share,
    take_new_rows,
    uniform_rows,
)
from distmarl.buffers.schema import BufferSchema, flatten, lookup, unflatten
from distmarl.buffers.storage import RingStorage
from distmarl.types import SampleBatch


class BufferRatio:
    """The default of ``sample(..., replay_ratio=)``: the buffer's own ``replay_ratio``."""

    def __repr__(self) -> str:
        return "BUFFER_RATIO"


#: ``replay_ratio`` argument meaning "the ratio the buffer was built with".
BUFFER_RATIO = BufferRatio()
_SHAPE = attrgetter("shape")
_DTYPE = attrgetter("dtype")


class MultiAgentReplayBuffer:
    """Per-agent circular storage shared by many writers and many readers (consumers).

    :param memory_size: capacity in rows (one row = one env step of one sub-env, all agents).
    :param field_names: transition fields in order, e.g. ``["obs", "action", "reward", ...]``.
    :param agent_ids: every agent that appears in a row.
    :param device: torch device that :meth:`sample` puts tensors on (None: CPU).
    :param replay_ratio: None for uniform replay; ``r`` in ``[0, 1)`` for mix-in sampling:
        ``round(batch * (1 - r))`` rows are the consumer's unreceived rows (oldest first) and the
        rest uniform replay; ``r = 0`` streams new rows only.
    :param learning_starts: :meth:`sample` returns None until this many rows were added.
    :param seed: seed of the sampling generator.
    :param samples_per_insert: optional rate limit, sampled rows allowed per inserted row.
    :param error_buffer: allowed drift of the rate limit, in sampled rows.
    """

    def __init__(
        self,
        memory_size: int,
        field_names: Sequence[str],
        agent_ids: Sequence[str],
        device: Any = None,
        replay_ratio: float | None = None,
        learning_starts: int = 0,
        seed: int | None = None,
        samples_per_insert: float | None = None,
        error_buffer: float | None = None,
    ) -> None:
        _check_config(memory_size, field_names, agent_ids, replay_ratio, learning_starts)
        self.memory_size = int(memory_size)
        self.field_names = list(field_names)
        self.agent_ids = list(agent_ids)
        self.device = device
        self.replay_ratio = None if replay_ratio is None else float(replay_ratio)
        self.learning_starts = int(learning_starts)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.samples_per_insert = samples_per_insert
        self.error_buffer = error_buffer
        self.rate_limiter: SampleToInsertRatio | None = None
        if samples_per_insert is not None:
            buffer = error_buffer if error_buffer is not None else max(1.0, samples_per_insert) * 1024
            self.rate_limiter = SampleToInsertRatio(samples_per_insert, buffer, learning_starts)
        self.consumers: dict[str, ConsumerState] = {}
        self.schema: BufferSchema | None = None
        self.storage: RingStorage | None = None
        self._agent_set = frozenset(self.agent_ids)
        self._columns: list[tuple] = []
        self._structured: list[tuple] = []
        self._fast_path = False  # True once a schema without dict / tuple values exists
        self._fast_keys: list[tuple[int, str]] = []
        self._fast_agent_counts: list[int] = []
        self._fast_shapes: dict[int, list[tuple]] = {}
        self._fast_dtypes: set[tuple] = set()
        self._first_dtypes: list[np.dtype] = []
        self._assembly: list[list[tuple]] = []

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return 0 if self.storage is None else self.storage.size

    @property
    def counter(self) -> int:
        """Rows ever added."""
        return 0 if self.storage is None else self.storage.counter

    # ------------------------------------------------------------------ writing
    def save_to_memory(self, *args: Mapping[str, Any], is_vectorised: bool = False,
                       member: int | None = None) -> int:
        """Store one env step (``agent -> value`` per field, in ``field_names`` order), or with
        ``is_vectorised`` one step of ``num_envs`` sub-envs (``agent -> (num_envs, ...)``).
        Returns the number of rows written."""
        if is_vectorised and self._fast_path:  # the hot path, inlined: ~1 us less per call
            arrays = self._fast_arrays(args)
            if arrays is not None:
                return self._commit(arrays, len(arrays[0]), member)
        return self._write(args, is_vectorised, member)

    def save_to_memory_single_env(self, *args: Mapping[str, Any], member: int | None = None) -> int:
        return self._write(args, vectorised=False, member=member)

    def save_to_memory_vect_envs(self, *args: Mapping[str, Any], member: int | None = None) -> int:
        return self._write(args, vectorised=True, member=member)

    def add(self, data: Mapping[str, Mapping[str, Any]], member: int | None = None) -> int:
        """Store a chunk: ``data[field][agent]`` with a leading row axis ``(n, ...)``."""
        missing = [f for f in self.field_names if f not in data]
        unknown = [f for f in data if f not in self.field_names]
        if missing or unknown:
            raise ValueError(
                f"chunk fields {sorted(data)} do not match the buffer's field_names "
                f"{self.field_names}: missing {missing}, unknown {unknown}"
            )
        return self._write([data[f] for f in self.field_names], vectorised=True, member=member)

    @staticmethod
    def stack_transitions(transitions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Stack per-step ``agent -> value`` dicts into ``agent -> (len(transitions), ...)``.
        Dict and tuple values are stacked per key."""
        if not transitions:
            raise ValueError("stack_transitions needs at least one transition")
        out: dict[str, Any] = {}
        for agent in transitions[0]:
            structure, first = flatten(transitions[0][agent])
            leaves = [[leaf] for _, leaf in first]
            for t in transitions[1:]:
                for column, (_, leaf) in zip(leaves, flatten(t[agent])[1], strict=True):
                    column.append(leaf)
            out[agent] = unflatten(structure, [np.stack(c) for c in leaves])
        return out

    def _write(self, values: Sequence[Mapping[str, Any]], vectorised: bool,
               member: int | None) -> int:
        arrays = self._fast_arrays(values) if vectorised and self._fast_path else None
        if arrays is None:
            if self.schema is None:
                self._check_mappings(values)
                self._init_schema(values, vectorised)
            arrays, n = self._prepare(values, vectorised)
        else:
            n = len(arrays[0])
        return self._commit(arrays, n, member)

    def _commit(self, arrays: list[np.ndarray], n: int, member: int | None) -> int:
        self.storage.write(arrays, n, member)  # type: ignore[union-attr]
        if self.rate_limiter is not None:
            self.rate_limiter.inserts += n
        return n

    def _fast_arrays(self, values: Sequence[Mapping[str, Any]]) -> list[np.ndarray] | None:
        """The hot path for well-formed vectorised saves of numpy arrays: a few list
        comparisons done in C. None when anything looks off; :meth:`_prepare` then finds (and
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

    def _check_mappings(self, values: Sequence[Mapping[str, Any]]) -> None:
        if len(values) != len(self.field_names):
            raise ValueError(
                f"expected {len(self.field_names)} fields {self.field_names}, got {len(values)}"
            )
        for name, per_agent in zip(self.field_names, values, strict=True):
            if not isinstance(per_agent, Mapping):
                raise ValueError(
                    f"field '{name}' must be a dict agent_id -> value, got {type(per_agent).__name__}"
                )
            if per_agent.keys() != self._agent_set:
                missing = sorted(self._agent_set - per_agent.keys())
                unknown = sorted(set(per_agent) - self._agent_set)
                raise ValueError(
                    f"field '{name}': agent ids do not match the buffer's agent_ids "
                    f"{self.agent_ids}: missing {missing}, unknown {unknown}"
                )

    def _init_schema(self, values: Sequence[Mapping[str, Any]], vectorised: bool) -> None:
        schema = BufferSchema.infer(self.field_names, self.agent_ids, values, vectorised)
        self._set_schema(schema)
        self.storage = RingStorage(self.memory_size, schema.columns)

    def _set_schema(self, schema: BufferSchema) -> None:
        self.schema = schema
        field_index = {f: i for i, f in enumerate(self.field_names)}
        self._columns = [
            (field_index[c.field], c.agent, c.path, c.shape, c.dtype, {c.dtype}, c)
            for c in schema.columns
        ]
        self._fast_keys = [(field_index[c.field], c.agent) for c in schema.columns]
        self._fast_agent_counts = [len(self.agent_ids)] * len(self.field_names)
        self._fast_shapes: dict[int, list[tuple]] = {}
        self._first_dtypes = [c.dtype for c in schema.columns]
        self._fast_dtypes: set[tuple] = {tuple(self._first_dtypes)}
        self._structured = [
            (field_index[name], agent, structure)
            for (name, agent), structure in schema.structures.items() if structure is not None
        ]
        self._fast_path = not self._structured
        self._assembly = [
            [(agent, schema.structures[(name, agent)],
              [i for i, c in enumerate(schema.columns) if c.field == name and c.agent == agent])
             for agent in self.agent_ids]
            for name in self.field_names
        ]

    def _prepare(self, values: Sequence[Mapping[str, Any]], vectorised: bool
                 ) -> tuple[list[np.ndarray], int]:
        """Check every leaf against the schema and return the arrays to write, ``(n, *shape)``."""
        if len(values) != len(self.field_names):
            self._check_mappings(values)
        for per_agent in values:
            if not isinstance(per_agent, Mapping) or per_agent.keys() != self._agent_set:
                self._check_mappings(values)
        out: list[np.ndarray] = []
        n = -1
        first: tuple | None = None
        for fi, agent, path, shape, dtype, ok_dtypes, spec in self._columns:
            value = values[fi][agent]
            if path:
                value = self._leaf(value, spec)
            arr = np.asarray(value)
            if vectorised:
                if arr.shape[1:] != shape or arr.ndim == 0:
                    raise ValueError(_shape_error(spec, arr.shape, ("num_envs", *shape)))
            else:
                if arr.shape != shape:
                    raise ValueError(_shape_error(spec, arr.shape, shape))
                arr = arr[None]
            if arr.dtype not in ok_dtypes:
                if not np.can_cast(arr.dtype, dtype, "same_kind"):
                    raise ValueError(
                        f"agent '{spec.agent}' field '{spec.name.split('/', 1)[1]}': dtype "
                        f"{arr.dtype} cannot be stored in a {dtype} column (first save's dtype)"
                    )
                ok_dtypes.add(arr.dtype)
            if n != arr.shape[0]:
                if n == -1:
                    n, first = arr.shape[0], (spec, arr.shape)
                else:
                    assert first is not None
                    raise ValueError(
                        f"agents disagree on num_envs: agent '{first[0].agent}' field "
                        f"'{first[0].field}' has shape {first[1]} but agent '{spec.agent}' field "
                        f"'{spec.field}' has shape {arr.shape}"
                    )
            out.append(arr)
        if self._structured:
            self._check_structures(values)
        self._fast_dtypes.add(tuple(a.dtype for a in out))
        return out, n

    def _leaf(self, value: Any, spec: Any) -> Any:
        try:
            return lookup(value, spec.path)
        except (KeyError, IndexError, TypeError) as err:
            raise ValueError(
                f"agent '{spec.agent}' field '{spec.field}': value has no entry {list(spec.path)} "
                f"({err!r}); its structure differs from the first save"
            ) from None

    def _check_structures(self, values: Sequence[Mapping[str, Any]]) -> None:
        """Structured (dict / tuple) values must keep the first save's keys exactly."""
        for fi, agent, structure in self._structured:
            got = flatten(values[fi][agent])[0]
            if got != structure:
                raise ValueError(
                    f"agent '{agent}' field '{self.field_names[fi]}': structure {got} differs "
                    f"from the first save's {structure}"
                )

    # ------------------------------------------------------------------ reading
    def ready(self) -> bool:
        """True once ``learning_starts`` rows were added (and at least one is stored)."""
        return len(self) > 0 and self.counter >= self.learning_starts

    def can_insert(self, n: int) -> bool:
        """False while the rate limiter wants samplers to catch up."""
        return self.rate_limiter is None or self.rate_limiter.can_insert(n, len(self))

    def can_sample(self, batch_size: int) -> bool:
        if not self.ready():
            return False
        return self.rate_limiter is None or self.rate_limiter.can_sample(batch_size, len(self))

    def sample_numpy(self, batch_size: int, consumer: str = "default",
                     member: int | None = None,
                     replay_ratio: float | None | BufferRatio = BUFFER_RATIO,
                     ) -> SampleBatch | None:
        """A batch as numpy arrays (see :class:`~distmarl.types.SampleBatch`), or None before
        ``learning_starts``, while rate-limited, or when there is nothing to return.

        ``member`` restricts the batch to that member's rows; ``replay_ratio`` overrides the
        buffer's ratio for this call (an on-policy learner streams its own member's rows with
        ``member=m, replay_ratio=0`` while off-policy learners mix in replay)."""
        if int(batch_size) <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        r = self.replay_ratio if replay_ratio is BUFFER_RATIO else _check_ratio(replay_ratio)
        if not self.can_sample(batch_size):
            return None
        assert self.storage is not None
        state = self.consumer(consumer)
        if r is None:
            new = np.empty(0, dtype=np.int64)
        else:
            new = take_new_rows(self.storage, state, new_row_share(batch_size, r), member)
        rest = 0 if r == 0 else batch_size - len(new)
        indices = np.concatenate([new, uniform_rows(self.storage, rest, self.rng, member)])
        if len(indices) == 0:
            return None
        if self.rate_limiter is not None:
            self.rate_limiter.samples += len(indices)
        return SampleBatch(self._assemble(self.storage.gather(indices)), len(new), indices)

    def sample(self, batch_size: int, consumer: str = "default", member: int | None = None,
               replay_ratio: float | None | BufferRatio = BUFFER_RATIO,
               ) -> tuple[dict[str, Any], ...] | None:
        """A batch as a tuple in ``field_names`` order of ``agent -> torch.Tensor`` on
        ``device``, shape ``(batch_size, *field_shape)``; None when :meth:`sample_numpy` is."""
        batch = self.sample_numpy(batch_size, consumer, member, replay_ratio)
        if batch is None:
            return None
        from distmarl.buffers.tensors import to_torch

        return to_torch(batch.data, self.device)

    def consumer(self, name: str) -> ConsumerState:
        """The named consumer's state; a new consumer starts at the oldest stored row."""
        state = self.consumers.get(name)
        if state is None:
            oldest = 0 if self.storage is None else self.storage.oldest
            state = self.consumers[name] = ConsumerState(cursor=oldest)
        return state

    def _assemble(self, columns: list[np.ndarray]) -> tuple[dict[str, Any], ...]:
        out = []
        for per_field in self._assembly:
            d = {}
            for agent, structure, idx in per_field:
                leaves = [c if c.ndim > 1 else c[:, None] for c in (columns[i] for i in idx)]
                d[agent] = leaves[0] if structure is None else unflatten(structure, leaves)
            out.append(d)
        return tuple(out)

    # ------------------------------------------------------------------ state
    def stats(self) -> dict[str, Any]:
        """Sizes and per-consumer counters (plain numbers)."""
        return {
            "size": len(self),
            "counter": self.counter,
            "capacity": self.memory_size,
            "bytes": 0 if self.storage is None else self.storage.nbytes(),
            "consumers": {
                name: {"cursor": s.cursor, "received_new": s.received_new, "dropped": s.dropped,
                       "pending": max(0, self.counter - max(s.cursor, self.counter - len(self)))}
                for name, s in self.consumers.items()
            },
            "rate_limiter": None if self.rate_limiter is None else self.rate_limiter.state_dict(),
        }

    def config(self) -> dict[str, Any]:
        return {
            "memory_size": self.memory_size,
            "field_names": list(self.field_names),
            "agent_ids": list(self.agent_ids),
            "replay_ratio": self.replay_ratio,
            "learning_starts": self.learning_starts,
            "seed": self.seed,
            "samples_per_insert": self.samples_per_insert,
            "error_buffer": self.error_buffer,
        }

    def state_dict(self) -> dict[str, Any]:
        from distmarl.buffers.state import buffer_state

        return buffer_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        from distmarl.buffers.state import load_buffer_state

        load_buffer_state(self, state)

    def save(self, path: str | Path) -> Path:
        """Write the buffer to an Arrow IPC file (``.parquet`` suffix: Parquet), atomically."""
        from distmarl.buffers.io import write_state

        return write_state(self.state_dict(), Path(path))

    @classmethod
    def load(cls, path: str | Path, device: Any = None) -> MultiAgentReplayBuffer:
        """A buffer rebuilt from a file written by :meth:`save`."""
        from distmarl.buffers.io import read_state

        state = read_state(Path(path))
        cfg = state["meta"]["config"]
        buf = cls(device=device, **cfg)
        buf.load_state_dict(state)
        return buf


def _shape_error(spec: Any, got: tuple, expected: tuple) -> str:
    return (
        f"agent '{spec.agent}' field '{spec.name.split('/', 1)[1]}': shape {tuple(got)} does "
        f"not match {tuple(expected)} (from the first save)"
    )


def _check_config(memory_size: int, field_names: Sequence[str], agent_ids: Sequence[str],
                  replay_ratio: float | None, learning_starts: int) -> None:
    if int(memory_size) <= 0:
        raise ValueError(f"memory_size must be a positive number of rows, got {memory_size}")
    if not field_names or len(set(field_names)) != len(field_names):
        raise ValueError(f"field_names must be non-empty and unique, got {list(field_names)}")
    if not agent_ids or len(set(agent_ids)) != len(agent_ids):
        raise ValueError(f"agent_ids must be non-empty and unique, got {list(agent_ids)}")
    for name in [*field_names, *agent_ids]:
        if not isinstance(name, str) or "/" in name or not name:
            raise ValueError(f"field names and agent ids must be non-empty strings without '/': {name!r}")
    _check_ratio(replay_ratio)
    if int(learning_starts) < 0:
        raise ValueError(f"learning_starts must be >= 0, got {learning_starts}")


def _check_ratio(replay_ratio: float | None) -> float | None:
    """The ratio as given (None or in ``[0, 1)``), else ValueError naming it."""
    if replay_ratio is not None and not 0.0 <= float(replay_ratio) < 1.0:
        raise ValueError(f"replay_ratio must be None or in [0, 1), got {replay_ratio}")
    return replay_ratio
