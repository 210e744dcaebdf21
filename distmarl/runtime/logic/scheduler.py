"""Which actor calls to make next: the update-to-data ratio and the policy-lag bounds.

Pure code, no Ray. The coordinator asks :meth:`Scheduler.next_calls` for calls, turns each
into an actor call, and reports each back with :meth:`Scheduler.on_result` or
:meth:`Scheduler.on_failure`. One call per actor in flight at most, so no queue grows::

    for call in scheduler.next_calls():
        refs[submit(call)] = call
    ...
    scheduler.on_result(refs.pop(ref), ray.get(ref))

A member runs until its env steps reach its ``boundary`` (the next evolution step); then it
is idle and waits (:meth:`Scheduler.at_boundary`). The family's rules (steps per call, what a
result earns, the lag bound) come from the data path (:mod:`distmarl.runtime.logic.datapath`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from distmarl.runtime.logic.datapath import MAX_UPDATES_PER_CALL, DataPath, Started
from distmarl.runtime.logic.run_state import RUN, WAIT, MemberState, RunState


@dataclass(frozen=True)
class Call:
    """One actor call: ``train(member, updates)`` on the member's learner, or
    ``collect(member, worker, steps, version)`` on one of its rollout workers (``steps``
    vectorised steps acting with weights ``version``)."""

    kind: Literal["train", "collect"]
    member: int
    worker: int = -1
    updates: int = 0
    steps: int = 0
    version: int = 0


class Collected(Protocol):
    """What a finished collect call reports (the rollout worker's result)."""

    @property
    def env_steps(self) -> int: ...

    @property
    def version(self) -> int: ...


class Trained(Protocol):
    """What a finished train call reports (the learner's result): ``weights`` is
    ``(version, box)`` when it published new weights."""

    @property
    def updates(self) -> int: ...

    @property
    def weights(self) -> tuple[int, Any] | None: ...


class Scheduler:
    """Plans calls for ``state``'s members, ``workers`` rollout workers each, every worker
    stepping ``num_envs`` sub-envs; writes the members' scheduling counters and the run's
    ``total_env_steps`` / ``buffer_rows``."""

    def __init__(self, path: DataPath, state: RunState, workers: int, num_envs: int) -> None:
        self.path = path
        self.state = state
        self.workers = workers
        self.num_envs = num_envs
        self.learner_busy: set[int] = set()
        self.collecting: dict[tuple[int, int], Started] = {}

    # ------------------------------------------------------------------ planning
    def next_calls(self) -> list[Call]:
        """Every call that may start now; each is counted as in flight from here on."""
        calls: list[Call] = []
        for m in self.state.members:
            if m.phase != RUN:
                continue
            if self._may_train(m):
                k = min(int(m.owed), MAX_UPDATES_PER_CALL)
                m.owed -= k
                m.requested = k
                self.learner_busy.add(m.member)
                calls.append(Call("train", m.member, updates=k))
            steps = self.path.collect_steps(m)
            for w in range(self.workers):
                if (m.member, w) in self.collecting or m.scheduled_steps >= m.boundary:
                    continue
                if not self.path.may_collect(m, self._started(m.member),
                                             m.member in self.learner_busy, self.workers):
                    break  # the learner is behind: keep the update-to-data ratio exact
                m.scheduled_steps += steps * self.num_envs
                self.collecting[(m.member, w)] = (m.updates, m.version)
                calls.append(Call("collect", m.member, w, steps=steps, version=m.version))
        return calls

    def _may_train(self, m: MemberState) -> bool:
        return (m.member not in self.learner_busy and m.owed >= 1
                and self.path.may_learn(self.state.buffer_rows)
                and self.path.may_train(m, self._started(m.member)))

    def _started(self, member: int) -> list[Started]:
        return [self.collecting[(member, w)] for w in range(self.workers)
                if (member, w) in self.collecting]

    # ------------------------------------------------------------------ results
    def on_result(self, call: Call, result: Collected | Trained) -> None:
        """Account for a finished call (``result`` is the actor's return value)."""
        m = self.state.members[call.member]
        if call.kind == "collect":
            self._collected(m, call, cast(Collected, result))
        else:
            self._trained(m, cast(Trained, result))

    def _collected(self, m: MemberState, call: Call, result: Collected) -> None:
        del self.collecting[(m.member, call.worker)]
        m.scheduled_steps += result.env_steps - call.steps * self.num_envs
        m.env_steps += result.env_steps
        self.state.count_steps(result.env_steps)
        m.max_lag_seen = max(m.max_lag_seen, m.version - result.version)
        self.path.on_collected(m, result.env_steps, self.state.buffer_rows)

    def _trained(self, m: MemberState, result: Trained) -> None:
        self.learner_busy.discard(m.member)
        m.updates += result.updates
        self.path.on_trained(m, m.requested, result.updates)
        m.requested = 0
        if result.weights is not None:
            m.set_weights(*result.weights)
        elif result.updates:
            m.published_latest = False

    def on_failure(self, call: Call) -> int:
        """Account for a call that failed (its actor died, or an actor it called): a lost
        chunk's steps are scheduled again, a lost train call's updates are owed again.
        Returns what was lost: env steps (collect) or updates (train)."""
        m = self.state.members[call.member]
        if call.kind == "collect":
            del self.collecting[(m.member, call.worker)]
            lost = call.steps * self.num_envs
            m.scheduled_steps -= lost
            return lost
        self.learner_busy.discard(m.member)
        lost = m.requested
        m.owed += lost
        m.requested = 0
        m.published_latest = False  # it may have learned before it failed
        return lost

    def forget_owed(self, members: Sequence[int]) -> None:
        """The members' learners dropped their waiting fragments: nothing is owed."""
        for member in members:
            self.state.members[member].owed = 0.0

    # ------------------------------------------------------------------ phases
    def idle(self, member: int) -> bool:
        """No call of ``member`` in flight."""
        return member not in self.learner_busy and not self._started(member)

    def at_boundary(self, member: int) -> bool:
        """True when ``member`` just reached its boundary with every update done and nothing
        in flight; it then waits (phase ``WAIT``) for its evolution step."""
        m = self.state.members[member]
        if m.phase == RUN and m.env_steps >= m.boundary and m.owed < 1 and self.idle(member):
            m.phase = WAIT
            return True
        return False
