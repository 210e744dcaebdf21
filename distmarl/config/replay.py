"""Members' replay settings: the buffer's values as each member's starting hyperparameters,
and when collected env steps earn off-policy updates (:class:`UpdateRule`).

``replay_ratio`` and prioritised replay's ``alpha`` / ``beta`` are read per sample call, so
each off-policy member can hold its own (``algorithm.hp``) and ``evolution.hp_config`` can
mutate them like a learning rate. A member's value left null starts from the ``replay``
section's; a setting the run cannot use is an error naming it.

The buffer's size by family, when ``buffer.capacity`` is left out: :data:`REPLAY_CAPACITY`
rows for members that replay; for members that learn from their own fragments, room for the
fragments that can wait unread (:class:`FragmentRows`), which a replay-sized ring of image
rows would far exceed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any, NamedTuple

from distmarl.config.hparams import on_policy

#: Env steps a row spans unless ``replay.n_step`` says otherwise (MADDPG, MATD3; with
#: prioritised replay on by default too).
DEFAULT_N_STEP = 3
#: The off-policy hyperparameters a member's reads take from the ``replay`` section.
REPLAY_HP = ("replay_ratio", "prioritized_replay_alpha", "prioritized_replay_beta")
#: Rows of the buffer of members that replay, when ``buffer.capacity`` is left out.
REPLAY_CAPACITY = 100_000
#: An on-policy buffer holds at least this many times the rows of the fragments that can wait
#: unread (members' fragments interleave in one ring, so a row must outlast the writes of
#: every other fragment in flight).
FRAGMENT_CAPACITY_MARGIN = 2
#: What a stored ``replay_ratio`` of 0 reads as. 0 used to mean "a batch of new rows only"
#: and is no ratio now; this one's mix-in still takes every row of a batch from the new rows
#: (``round(batch_size * (1 - r)) == batch_size`` for any batch under half a million rows),
#: topping up from replay where too few are new, and mutates like any ratio.
STORED_STREAM_RATIO = 1e-6


class UpdateRule(NamedTuple):
    """When an off-policy member's collected env steps earn updates (the update-to-data rule):
    one update per ``learn_step`` of its own env steps past ``learning_delay``, counted for a
    store that leaves ``learning_starts`` rows or more in the buffer; steps of a store before
    that never count. The buffer's grants (:class:`~distmarl.buffers.grants.UpdateGrants`)
    count with it, for a run's learners and for the reference trainer alike, each passing
    its own buffer's rows (a run's buffer is shared: it counts every member's transitions).

    Example, ``learn_step`` 4, ``learning_delay`` 100, stores of 8 env steps: the one from 96
    to 104 counts 4 steps, one update; the 4 steps before 100 count none."""

    learning_starts: int
    learning_delay: int

    def may_learn(self, buffer_rows: int) -> bool:
        """Whether learners may sample from a buffer holding ``buffer_rows`` rows."""
        return buffer_rows >= self.learning_starts

    def counted(self, env_steps: int, new_steps: int, buffer_rows: int) -> int:
        """Steps that count of the last ``new_steps`` of a member's ``env_steps`` (already
        counted in it), stored leaving ``buffer_rows`` rows ever added: those past
        ``learning_delay``; none before ``learning_starts`` rows."""
        counted = env_steps - max(env_steps - new_steps, self.learning_delay)
        if counted <= 0 or not self.may_learn(buffer_rows):
            return 0
        return counted


#: every env step counts from the first row (what learners that read fragments are given, and a
#: buffer's default)
EVERY_STEP = UpdateRule(0, 0)


def stored_ratio(value: Any) -> Any:
    """A stored ``replay_ratio`` (config, range bound or member hyperparameter) as it reads
    today: :data:`STORED_STREAM_RATIO` for 0, anything else as it is."""
    zero = isinstance(value, int | float) and not isinstance(value, bool) and value == 0
    return STORED_STREAM_RATIO if zero else value


def stored_hp(hp: Mapping[str, Any]) -> dict[str, Any]:
    """A member's stored hyperparameters with a ``replay_ratio`` of 0 read as
    :func:`stored_ratio` says (a fresh dict)."""
    out = dict(hp)
    if "replay_ratio" in out:
        out["replay_ratio"] = stored_ratio(out["replay_ratio"])
    return out


class FragmentRows(NamedTuple):
    """What an on-policy population can have waiting unread in its buffer: ``fragments``
    (per member, one per worker plus the one being learned) of up to ``steps`` vectorised
    steps of ``num_envs`` envs each."""

    fragments: int
    steps: int
    num_envs: int

    @property
    def rows(self) -> int:
        """Rows the waiting fragments fill."""
        return self.fragments * self.steps * self.num_envs

    @property
    def capacity(self) -> int:
        """The smallest buffer that carries them: :data:`FRAGMENT_CAPACITY_MARGIN` times."""
        return FRAGMENT_CAPACITY_MARGIN * self.rows


def fragment_rows(members: int, workers_per_member: int, learn_steps: Sequence[Any],
                  num_envs: int) -> FragmentRows:
    """:class:`FragmentRows` of ``members`` members of ``workers_per_member`` workers, whose
    fragments are at most the largest of ``learn_steps`` (the configured ``learn_step``s and
    the top of a searched range; entries that are not numbers are left to their own checks)."""
    steps = max((int(s) for s in learn_steps
                 if isinstance(s, (int, float)) and not isinstance(s, bool)), default=1)
    return FragmentRows(members * (workers_per_member + 1), max(1, steps), num_envs)


def replay_hp(algorithm: str, hp: Mapping[str, Any], replay: Any,
              searched: Set[str]) -> dict[str, Any]:
    """The replay hyperparameters ``hp`` leaves null, filled from the ``replay`` section's
    values (None for members without replay: nothing to fill).

    ValueError: a member's ``alpha`` / ``beta`` (set or searched) without prioritised replay;
    a searched ``replay_ratio`` with no starting value (replay only).
    """
    if on_policy(algorithm) or replay is None:
        return {}
    prioritized = replay.prioritized
    out: dict[str, Any] = {}
    for name, key in zip(REPLAY_HP[1:], ("alpha", "beta"), strict=True):
        if prioritized is None and (hp[name] is not None or name in searched):
            where = ("evolution.hp_config" if name in searched else "algorithm.hp")
            raise ValueError(f"{where}.{name}: set replay.prioritized_replay: true first (this "
                             "run replays uniformly)")
        if prioritized is not None and hp[name] is None:
            out[name] = prioritized[key]
    if hp["replay_ratio"] is None:
        if "replay_ratio" in searched and replay.replay_ratio is None:
            raise ValueError("evolution.hp_config.replay_ratio: members need a starting value "
                             "to mutate; set replay.replay_ratio or algorithm.hp.replay_ratio "
                             "(null: replay only)")
        if replay.replay_ratio is not None:
            out["replay_ratio"] = replay.replay_ratio
    return out
