"""Plain data types shared by every layer (no Ray, no torch).

Only these cross process boundaries: numpy arrays inside plain dicts and NamedTuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

AgentID = str
MemberID = int
FieldName = str

#: field -> agent -> value. A value is an array (or a dict / tuple of arrays for structured
#: observations) whose leading axis is the row axis: shape ``(n, *field_shape)``.
FieldBatch = Mapping[FieldName, Mapping[AgentID, Any]]


class TransitionChunk(NamedTuple):
    """Many transitions written to the buffer in one call.

    ``data[field][agent]`` has shape ``(n, *field_shape)``: ``n`` rows, the same ``n`` for every
    field and agent. ``member`` is the population member whose policy produced the rows (or
    None when rows belong to no member); ``env_steps`` the member's env steps they recorded
    (what earns its learner updates: :class:`~distmarl.buffers.grants.UpdateGrants`).
    """

    data: FieldBatch
    member: MemberID | None = None
    env_steps: int = 0


class SampleBatch(NamedTuple):
    """One sampled batch as numpy arrays.

    ``data`` is a tuple in the buffer's ``field_names`` order; each item is a dict
    ``agent -> array`` of shape ``(batch, *field_shape)`` with scalar fields as ``(batch, 1)``.
    Row ``i`` is the same transition in every field and every agent. ``num_new`` rows at the
    front are rows this consumer had not received before; the rest are replay.
    ``indices`` are the global insertion indices (``0 .. counter-1``) of the rows.
    ``weights``: prioritised replay's importance weights, ``(batch,)`` float32 in ``(0, 1]``
    (new rows 1); None from a buffer without prioritised replay.
    """

    data: tuple[dict[AgentID, Any], ...]
    num_new: int
    indices: np.ndarray
    weights: np.ndarray | None = None


class JoinedSample(NamedTuple):
    """Several consumers' batches in one set of arrays (what a learner hosting several members
    reads in one call), laid out update by update: every consumer's first batch, in request
    order, then every second batch, and so on; so one update's batches of all consumers are
    adjacent rows.

    ``data`` is a tuple in the buffer's ``field_names`` order, each item ``agent -> array``
    ``(rows, *field_shape)`` over all batches (scalar fields ``(rows, 1)``). ``rows[u][r]``
    is the size of request ``r``'s batch ``u`` (0: it has no such batch; a consumer's batches
    stop at the first that comes back empty), ``num_new[u][r]`` how many of its rows are new
    to the consumer. ``indices[r]`` are request ``r``'s rows' global insertion indices, its
    batches in order. ``weights``: prioritised replay's importance weights ``(rows,)``, or
    None."""

    data: tuple[dict[AgentID, Any], ...]
    rows: list[list[int]]
    num_new: list[list[int]]
    indices: list[np.ndarray]
    weights: np.ndarray | None = None

    def batches(self, request: int) -> list[tuple[int, int]]:
        """Request ``request``'s batches as ``(first row, rows)`` spans of ``data``."""
        spans, start = [], 0
        for per_update in self.rows:
            if per_update[request]:
                spans.append((start + sum(per_update[:request]), per_update[request]))
            start += sum(per_update)
        return spans


class PriorityUpdate(NamedTuple):
    """A learner's new priorities: the absolute TD errors ``(n,)`` of the rows at global
    ``indices`` ``(n,)`` it sampled (prioritised replay)."""

    indices: np.ndarray
    td_errors: np.ndarray


@dataclass(frozen=True)
class ReadSpec:
    """How one consumer reads the replay buffer (plain data: learners send it to the buffer
    actor). Make one with :meth:`stream`, :meth:`mixin` or :meth:`replay`.

    ``kind``: ``"stream"``, only rows the consumer has not received, each once, oldest first
    (an on-policy learner's fragments); ``"mixin"``, unreceived rows (the newest; the oldest
    under the buffer's RLlib-style mix-in) with replay at ``replay_ratio`` (the replayed
    share of a batch, in ``(0, 1)``); ``"replay"``, replay
    only. ``member``: only that member's rows. Replay is uniform, or where the buffer keeps
    priorities drawn by this consumer's own TD errors, with exponents ``alpha`` / ``beta``
    (None: the buffer's)."""

    kind: Literal["stream", "mixin", "replay"]
    replay_ratio: float | None = None
    member: int | None = None
    alpha: float | None = None
    beta: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("stream", "mixin", "replay"):
            raise ValueError(f"read kind must be stream, mixin or replay, got {self.kind!r}")
        if (self.kind == "mixin") != (self.replay_ratio is not None):
            raise ValueError(f"a {self.kind} read {'needs' if self.kind == 'mixin' else 'has no'}"
                             f" replay_ratio, got {self.replay_ratio}")
        if self.replay_ratio is not None and not 0.0 < float(self.replay_ratio) < 1.0:
            raise ValueError(f"replay_ratio must be in (0, 1), got {self.replay_ratio} (only "
                             "new rows, each once: a stream read; only replay: a replay read)")
        if self.kind == "stream" and (self.alpha is not None or self.beta is not None):
            raise ValueError("a stream read replays nothing: it takes no alpha or beta")

    @classmethod
    def stream(cls, member: int | None = None) -> ReadSpec:
        return cls("stream", member=member)

    @classmethod
    def mixin(cls, replay_ratio: float, member: int | None = None, alpha: float | None = None,
              beta: float | None = None) -> ReadSpec:
        return cls("mixin", float(replay_ratio), member, alpha, beta)

    @classmethod
    def replay(cls, member: int | None = None, alpha: float | None = None,
               beta: float | None = None) -> ReadSpec:
        return cls("replay", None, member, alpha, beta)

    @classmethod
    def from_ratio(cls, replay_ratio: float | None, alpha: float | None = None,
                   beta: float | None = None) -> ReadSpec:
        """A member's read from its ``replay_ratio`` hyperparameter: mix-in, or replay only
        where it is None."""
        if replay_ratio is None:
            return cls.replay(alpha=alpha, beta=beta)
        return cls.mixin(replay_ratio, alpha=alpha, beta=beta)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Pace(NamedTuple):
    """A learner that reads at the pace its member's data earns updates: member ``member``'s
    learner, one update per ``learn_step`` of the member's env steps (its current value)."""

    member: int
    learn_step: float


class SampleRequest(NamedTuple):
    """One consumer's read: up to ``num_batches`` batches of ``batch_size`` rows as ``spec``
    says (the buffer registers it when it differs from the consumer's registered one), and
    the TD errors of its last read's batches (``priorities``, prioritised replay: applied
    first). A ``pace`` caps the batches at the updates the member's data has earned and not
    yet been granted (:class:`~distmarl.buffers.grants.UpdateGrants`); None reads as many as
    asked."""

    consumer: str
    batch_size: int
    num_batches: int
    spec: ReadSpec
    priorities: PriorityUpdate | None = None
    pace: Pace | None = None


#: The transition fields every off-policy member stores, in buffer order. ``next_obs`` is the
#: true next observation (the final one where an episode ended, never a reset observation);
#: ``terminated`` stops bootstrapping, ``truncated`` does not; ``active`` is False for rows of
#: agents that were dead or not acting at that step (their losses are masked out).
OFF_POLICY_FIELDS: tuple[str, ...] = (
    "obs", "action", "reward", "next_obs", "terminated", "truncated", "active",
)

#: The field n-step off-policy rows add (``replay.n_step > 1``), after ``OFF_POLICY_FIELDS``:
#: how many env steps the row spans (1 .. n), so a learner bootstraps with ``gamma ** n_steps``;
#: such rows' ``reward`` holds the window's ``n`` rewards undiscounted, shape ``(n,)``.
N_STEPS_FIELD = "n_steps"

#: The fields an on-policy member (IPPO, MAPPO) stores, in buffer order: the transition
#: without its next observation, plus what the behaviour policy recorded when it acted:
#: ``log_prob`` of the stored action, its value estimate ``value`` of ``obs``, and
#: ``next_value``, its value estimate of the true next observation (the final one where an
#: episode ended), float32 each. Advantages need the next observation only through its value,
#: so it is never stored: an image fragment holds each frame once.
ON_POLICY_FIELDS: tuple[str, ...] = (
    "obs", "action", "reward", "terminated", "truncated", "active", "log_prob", "value",
    "next_value",
)

#: Added after ``ON_POLICY_FIELDS`` when a member's value function reads the env's global state
#: (MAPPO on an env with ``env.state()``): the state before the step, ``(n, state_dim)``, the
#: same rows under every agent (the buffer's rings are per agent).
STATE_FIELDS: tuple[str, ...] = ("state",)


@dataclass(frozen=True)
class RolloutSpec:
    """What rollouts record, decided once (from the algorithm, its hyperparameters, the env and
    the buffer) and handed to the vector env, the collector, the buffer and the learner.

    ``on_policy``: whole fragments of the member's own policy, with its log-probs and values
    (``ON_POLICY_FIELDS``), else replayable transitions (``OFF_POLICY_FIELDS``);
    ``global_state``: each step's ``env.state()`` too (``STATE_FIELDS``, on-policy only: a
    value network reads it, or another member sharing the buffer does); ``n_step``: off-policy
    rows span up to ``n_step`` env steps (:mod:`distmarl.collect.nstep`)."""

    on_policy: bool
    global_state: bool = False
    n_step: int = 1

    def __post_init__(self) -> None:
        if self.global_state and not self.on_policy:
            raise ValueError("the global state is recorded for on-policy members only")
        if self.n_step > 1 and self.on_policy:
            raise ValueError(f"n_step {self.n_step}: on-policy members learn from whole "
                             "fragments with GAE; n-step rows are for off-policy members")

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields a collector writes per step, in buffer order."""
        if self.on_policy:
            return (*ON_POLICY_FIELDS, *STATE_FIELDS) if self.global_state else ON_POLICY_FIELDS
        return OFF_POLICY_FIELDS

    @property
    def buffer_fields(self) -> tuple[str, ...]:
        """The fields the buffer stores: :attr:`fields`, and ``N_STEPS_FIELD`` for n-step rows."""
        return (*self.fields, N_STEPS_FIELD) if self.n_step > 1 else self.fields
