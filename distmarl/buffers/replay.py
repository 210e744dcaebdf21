"""``MultiAgentReplayBuffer``: AgileRL's multi-agent buffer API on preallocated numpy rings.

Usage (one env step at a time, or a whole vectorised step)::

    buf = MultiAgentReplayBuffer(100_000, ["obs", "action", "reward", "next_obs", "done"],
                                 agent_ids=["speaker_0", "listener_0"], replay_ratio=0.5)
    buf.save_to_memory(obs, action, reward, next_obs, done, is_vectorised=True)  # (num_envs, ...)
    buf.register("learner-0", ReadSpec.mixin(0.5, member=0))  # how this consumer reads
    batch = buf.sample(256, "learner-0")  # tuple in field order, agent -> tensor

Extensions over AgileRL: rows tagged with a population ``member``; per-consumer reads
registered once (:meth:`~MultiAgentReplayBuffer.register` a
:class:`~distmarl.types.ReadSpec`: a mix-in of new rows and replay, fixed-size or RLlib's,
in-order streaming, or replay only; :mod:`distmarl.buffers.readers`); prioritised replay, a
sum-tree per consumer (:mod:`distmarl.buffers.priorities`); ``learning_starts``; a
samples-per-insert rate limiter; state_dict and Arrow files. A bad save raises
``ValueError`` before any row is written.

AgileRL's public API holds as its tests check it: ``save_to_memory`` (single and
vectorised), ``sample`` (float32 tensors for every field, ``(batch, *shape)``, scalars as
``(batch, 1)``), ``stack_transitions``, ``len``, ``counter``, ``memory_size``, ``field_names``,
``agent_ids``, ``device``. Where it differs: ``sample`` draws rows uniformly *with*
replacement (AgileRL's ``random.sample`` draws without, and raises ``ValueError`` when
``batch_size`` exceeds the stored rows) and returns None while nothing can be sampled; the
second positional argument of ``sample`` is ``consumer`` (AgileRL ignores extra arguments);
the first save fixes each column's shape and dtype; ``save_to_memory`` returns the rows
written; AgileRL's private ``memory`` deque, ``experience``, ``_add`` and
``_process_transition`` do not exist. ``read`` keeps the stored dtypes (uint8 frames, int8
boards, int64 actions): what distmarl's learners read.

The buffer composes its parts, each owning and serialising its own state: a
:class:`~distmarl.buffers.layout.ColumnLayout` (the schema; checks saves, reassembles batches),
a :class:`~distmarl.buffers.storage.RingStorage` (the rows), a
:class:`~distmarl.buffers.sampling.Sampler` (consumers' cursors, replay generator) and an
optional :class:`~distmarl.buffers.sampling.SampleToInsertRatio`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from distmarl.buffers.layout import ColumnLayout, check_mappings
from distmarl.buffers.priorities import PriorityParams
from distmarl.buffers.sampling import ConsumerState, Sampler, SampleToInsertRatio, check_ratio
from distmarl.buffers.schema import BufferSchema, stack_values
from distmarl.buffers.storage import PRIORITY_COLUMN, RingStorage
from distmarl.types import JoinedSample, ReadSpec, SampleBatch

#: Version of the :meth:`MultiAgentReplayBuffer.state_dict` layout; a load refuses others.
STATE_VERSION = 1


class MultiAgentReplayBuffer:
    """Per-agent circular storage shared by many writers and many readers (consumers).

    :param memory_size: capacity in rows (one row = one env step of one sub-env, all agents).
    :param field_names: transition fields in order, e.g. ``["obs", "action", "reward", ...]``.
    :param agent_ids: every agent that appears in a row.
    :param device: torch device that :meth:`sample` puts tensors on (None: CPU).
    :param replay_ratio: how a consumer that registered no read of its own
        (:meth:`register`) reads: None, replay only; ``r`` in ``(0, 1)``, a mix-in of the
        consumer's newest unreceived rows with replay (``r`` the replayed share).
    :param mixin: how mix-in reads build a batch. ``"fixed"``: ``batch_size`` rows, the newest
        unreceived first, older unreceived rows passed over (reachable by replay, counted as
        the consumer's ``skipped``). ``"rllib"``: RLlib's ``MultiAgentMixInReplayBuffer``, a
        variable batch of the *oldest* unreceived rows (up to the new share; the rest stay
        queued) plus replay in the ratio, nothing when no row is new
        (:mod:`distmarl.buffers.readers`).
    :param learning_starts: :meth:`sample` returns None until this many rows were added.
    :param seed: seed of the sampling generator.
    :param samples_per_insert: optional rate limit, sampled rows allowed per inserted row.
    :param error_buffer: allowed drift of the rate limit, in sampled rows.
    :param prioritized: prioritised replay's ``{alpha, beta, eps}`` (see
        :class:`~distmarl.buffers.priorities.PriorityParams`); None: uniform replay.
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
        prioritized: Mapping[str, float] | None = None,
        mixin: str = "fixed",
    ) -> None:
        _check_config(memory_size, field_names, agent_ids, replay_ratio, learning_starts)
        self.memory_size = int(memory_size)
        self.field_names = list(field_names)
        self.agent_ids = list(agent_ids)
        self.device = device
        self.replay_ratio = None if replay_ratio is None else float(replay_ratio)
        self.learning_starts = int(learning_starts)
        self.seed = seed
        self.samples_per_insert = samples_per_insert
        self.error_buffer = error_buffer
        self.prioritized = None if prioritized is None else PriorityParams(**prioritized)
        self.mixin = mixin
        self.rate_limiter = self._make_rate_limiter()
        self._sampler = self._make_sampler()
        # Both exist from the first save on (the schema is inferred from it), or from a load.
        self._layout: ColumnLayout | None = None
        self.storage: RingStorage | None = None

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return 0 if self.storage is None else self.storage.size

    @property
    def counter(self) -> int:
        """Rows ever added."""
        return 0 if self.storage is None else self.storage.counter

    @property
    def schema(self) -> BufferSchema | None:
        """The columns, inferred from the first save (None before it)."""
        return None if self._layout is None else self._layout.schema

    @property
    def consumers(self) -> Mapping[str, ConsumerState]:
        """Every consumer that sampled, by name (read-only view)."""
        return MappingProxyType(self._sampler.consumers)

    # ------------------------------------------------------------------ writing
    def save_to_memory(self, *args: Mapping[str, Any], is_vectorised: bool = False,
                       member: int | None = None) -> int:
        """Store one env step (``agent -> value`` per field, in ``field_names`` order), or with
        ``is_vectorised`` one step of ``num_envs`` sub-envs (``agent -> (num_envs, ...)``).
        Returns the number of rows written."""
        layout = self._layout
        if is_vectorised and layout is not None and layout.fast_path:  # the hot path, inlined
            arrays = layout.fast_arrays(args)
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
    def stack_transitions(transitions: Sequence[Any]) -> Any:
        """AgileRL's helper: one agent's values of one field over ``n`` steps (numbers,
        arrays, or dicts / tuples of them) stacked into ``(n, *shape)`` numpy arrays, a
        one-dimensional result as ``(n, 1)``; dicts / tuples per key / position.
        ``stack_transitions([{"a": 1.0}, {"a": 2.0}])`` is ``{"a": array([[1.], [2.]])}``."""
        return stack_values(transitions)

    def _write(self, values: Sequence[Mapping[str, Any]], vectorised: bool,
               member: int | None) -> int:
        layout = self._layout
        if layout is None:  # the first save: infer the columns, keep them once it is accepted
            check_mappings(self.field_names, self.agent_ids, values)
            first = ColumnLayout(BufferSchema.infer(self.field_names, self.agent_ids, values,
                                                    vectorised))
            arrays, n = first.prepare(values, vectorised)
            self._layout, self.storage = first, RingStorage(self.memory_size, first.schema.columns)
            return self._commit(arrays, n, member)
        fast = layout.fast_arrays(values) if vectorised and layout.fast_path else None
        if fast is not None:
            return self._commit(fast, len(fast[0]), member)
        arrays, n = layout.prepare(values, vectorised)
        return self._commit(arrays, n, member)

    def _commit(self, arrays: list[np.ndarray], n: int, member: int | None) -> int:
        self.storage.write(arrays, n, member)  # type: ignore[union-attr]
        if self.rate_limiter is not None:
            self.rate_limiter.record_insert(n)
        return n

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

    def register(self, consumer: str, spec: ReadSpec) -> None:
        """``consumer`` reads as ``spec`` says from now on: streamed, mixed in or replayed,
        one member's rows or all, prioritised replay's exponents (register again after they
        change). ValueError naming what is wrong."""
        self._sampler.register(consumer, spec)

    def read(self, batch_size: int, consumer: str = "default") -> SampleBatch | None:
        """``consumer``'s next batch as its registered read says (else the buffer's default),
        as numpy arrays in the stored dtypes (see :class:`~distmarl.types.SampleBatch`), new
        rows first; None before ``learning_starts``, while rate-limited, or when there is
        nothing to return. With prioritised replay the batch carries importance ``weights``."""
        drawn = self._draw(batch_size, consumer)
        if drawn is None:
            return None
        indices, num_new, weights = drawn
        assert self.storage is not None and self._layout is not None
        data = self._layout.assemble(self.storage.gather(indices))
        return SampleBatch(data, num_new, indices, weights)

    def read_many(self, reads: Sequence[tuple[str, int, int]]) -> JoinedSample:
        """Each ``(consumer, batch_size, num_batches)``'s batches drawn as :meth:`read` draws
        them, in the same order (a consumer's batches one after another, stopping at the first
        that comes back empty), and gathered in one go, update by update (see
        :class:`~distmarl.types.JoinedSample`): one gather per column for all of them, and one
        update's batches of every consumer adjacent."""
        drawn: list[list[tuple[np.ndarray, int, np.ndarray | None]]] = []
        for consumer, batch_size, num_batches in reads:
            mine: list[tuple[np.ndarray, int, np.ndarray | None]] = []
            for _ in range(num_batches):
                d = self._draw(batch_size, consumer)
                if d is None:
                    break
                mine.append(d)
            drawn.append(mine)
        updates = max((len(d) for d in drawn), default=0)
        order = [d[u] for u in range(updates) for d in drawn if u < len(d)]
        rows = [[len(d[u][0]) if u < len(d) else 0 for d in drawn] for u in range(updates)]
        num_new = [[d[u][1] if u < len(d) else 0 for d in drawn] for u in range(updates)]
        indices = [np.concatenate([b[0] for b in d]) if d else np.zeros(0, np.int64)
                   for d in drawn]
        weighted = [b[2] for b in order if b[2] is not None]
        if not order or self.storage is None or self._layout is None:
            return JoinedSample(tuple({} for _ in self.field_names), rows, num_new, indices)
        data = self._layout.assemble(self.storage.gather(np.concatenate([b[0] for b in order])))
        return JoinedSample(data, rows, num_new, indices,
                            np.concatenate(weighted) if weighted else None)

    def _draw(self, batch_size: int, consumer: str
              ) -> tuple[np.ndarray, int, np.ndarray | None] | None:
        """One batch's rows as ``consumer`` reads them (see :meth:`read`): global indices, how
        many are new, importance weights; None when there is nothing to read."""
        if int(batch_size) <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if not self.can_sample(batch_size):
            return None
        assert self.storage is not None
        indices, num_new, weights = self._sampler.draw(self.storage, consumer, int(batch_size))
        if len(indices) == 0:
            return None
        if self.rate_limiter is not None:
            self.rate_limiter.record_sample(len(indices))
        return indices, num_new, weights

    def update_priorities(self, consumer: str, indices: np.ndarray, td_errors: np.ndarray) -> int:
        """Set ``consumer``'s priorities of the rows at global ``indices`` (a batch's
        ``indices``) to ``|td_errors| + eps``; rows overwritten since are left alone. Returns
        the rows updated. ValueError on a buffer without prioritised replay."""
        if self.storage is None:
            return 0
        return self._sampler.update_priorities(self.storage, consumer, indices, td_errors)

    def sample(self, batch_size: int, consumer: str = "default"
               ) -> tuple[dict[str, Any], ...] | None:
        """A batch as AgileRL's ``sample`` returns it: a tuple in ``field_names`` order of
        ``agent -> float32 torch.Tensor`` on ``device`` (every field, integer and bool ones
        included; dict / tuple values per key), shape ``(batch_size, *field_shape)`` with
        scalar fields as ``(batch_size, 1)``; None when :meth:`read` is. :meth:`read` keeps
        the stored dtypes (what distmarl's learners read)."""
        batch = self.read(batch_size, consumer)
        if batch is None:
            return None
        from distmarl.buffers.tensors import to_float_torch

        tensors: tuple[dict[str, Any], ...] = to_float_torch(batch.data, self.device)
        return tensors

    # ------------------------------------------------------------------ state
    def stats(self) -> dict[str, Any]:
        """Sizes and per-consumer counters (plain numbers; see
        :class:`~distmarl.buffers.sampling.ConsumerState` for what each counts)."""
        return {
            "size": len(self),
            "counter": self.counter,
            "capacity": self.memory_size,
            "bytes": 0 if self.storage is None else self.storage.nbytes(),
            "consumers": self._sampler.stats(self.storage),
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
            "prioritized": None if self.prioritized is None else asdict(self.prioritized),
            "mixin": self.mixin,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the buffer exactly, as plain data (copies).

        ``meta`` is JSON-able: ``version``, ``config``, ``schema``, ``counter`` (rows ever
        added), ``consumers`` (name -> counters), ``readers`` (name -> its registered
        :class:`~distmarl.types.ReadSpec`), ``rng`` (the sampler's), ``rate_limiter`` and,
        with prioritised replay, ``priorities``.
        ``columns`` holds every stored row in insertion order, one array per column
        (``agent/field[/key]``) plus ``__member__`` and, with prioritised replay, one
        ``__priority__/<consumer>`` per consumer (``meta['priorities']`` holds the rest of its
        state). Checkpoints, buffer files and actor snapshots share this one form.
        """
        stored: dict[str, Any] = ({"counter": 0, "columns": {}} if self.storage is None
                                  else self.storage.state_dict())
        sampler = self._sampler.state_dict(self.storage)
        priorities = {}
        for name, tree in sampler["priorities"].items():
            stored["columns"][PRIORITY_COLUMN.format(name)] = tree.pop("priorities")
            priorities[name] = tree
        meta = {
            "version": STATE_VERSION,
            "config": self.config(),
            "schema": None if self.schema is None else self.schema.to_json(),
            "counter": stored["counter"],
            "consumers": sampler["consumers"],
            "rate_limiter": None if self.rate_limiter is None else self.rate_limiter.state_dict(),
            "rng": sampler["rng"],
            "readers": sampler["readers"],
            "priorities": priorities,
        }
        return {"meta": meta, "columns": stored["columns"]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load a :meth:`state_dict`; every part is checked first, so a bad state changes
        nothing. A state of a larger buffer keeps its newest ``memory_size`` rows."""
        meta = state["meta"]
        if meta.get("version") != STATE_VERSION:
            raise ValueError(f"buffer state version {meta.get('version')} is not {STATE_VERSION}")
        mine = {"field_names": self.field_names, "agent_ids": self.agent_ids}
        for key, ours in mine.items():
            if list(meta["config"][key]) != ours:
                raise ValueError(f"buffer state has {key} {meta['config'][key]}, this buffer {ours}")
        layout = storage = None
        if meta["schema"] is not None:
            layout = ColumnLayout(BufferSchema.from_json(meta["schema"]))
            if layout.field_names != self.field_names or layout.agent_ids != self.agent_ids:
                raise ValueError(f"buffer state's schema has fields {layout.field_names} and "
                                 f"agents {layout.agent_ids}, this buffer {mine}")
            storage = RingStorage(self.memory_size, layout.schema.columns)
            storage.load_state_dict({"counter": meta["counter"], "columns": state["columns"]})
        sampler = self._make_sampler()
        priorities = {name: {**p, "priorities": state["columns"][PRIORITY_COLUMN.format(name)]}
                      for name, p in meta.get("priorities", {}).items()}
        sampler.load_state_dict({"consumers": meta["consumers"], "rng": meta["rng"],
                                 "readers": meta.get("readers", {}), "priorities": priorities},
                                self.memory_size, int(meta["counter"]))
        limiter = self._make_rate_limiter()
        if limiter is not None and meta["rate_limiter"] is not None:
            limiter.load_state_dict(meta["rate_limiter"])
        self._layout, self.storage, self._sampler, self.rate_limiter = (
            layout, storage, sampler, limiter)

    def save(self, path: str | Path) -> Path:
        """Write the buffer to an Arrow IPC file (``.parquet`` suffix: Parquet), atomically."""
        from distmarl.buffers.io import write_state

        return write_state(self.state_dict(), Path(path))

    @classmethod
    def load(cls, path: str | Path, device: Any = None) -> MultiAgentReplayBuffer:
        """A buffer rebuilt from a file written by :meth:`save`. A file whose default
        ``replay_ratio`` was 0 (written when 0 meant streaming) gets None (replay only): a
        consumer that streams registers a stream read."""
        from distmarl.buffers.io import read_state

        state = read_state(Path(path))
        config = dict(state["meta"]["config"])
        if config.get("replay_ratio") == 0:
            config["replay_ratio"] = None
        buf = cls(device=device, **config)
        buf.load_state_dict(state)
        return buf

    def _make_sampler(self) -> Sampler:
        default = (ReadSpec.replay() if self.replay_ratio is None
                   else ReadSpec.mixin(self.replay_ratio))
        return Sampler(self.seed, self.prioritized, self.mixin, default)

    def _make_rate_limiter(self) -> SampleToInsertRatio | None:
        if self.samples_per_insert is None:
            return None
        error_buffer = self.error_buffer
        if error_buffer is None:
            error_buffer = max(1.0, self.samples_per_insert) * 1024
        return SampleToInsertRatio(self.samples_per_insert, error_buffer, self.learning_starts)


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
    check_ratio(replay_ratio)
    if int(learning_starts) < 0:
        raise ValueError(f"learning_starts must be >= 0, got {learning_starts}")

