"""Which actor calls to make next: collection, the policy-lag bound, and settling at a boundary.

Pure code, no Ray. The coordinator asks :meth:`Scheduler.next_calls` for calls, turns each
into an actor call, and reports each back with :meth:`Scheduler.on_result` or
:meth:`Scheduler.on_failure`. One call per actor in flight at most, so no queue grows::

    for call in scheduler.next_calls():
        refs[submit(call)] = call
    ...
    scheduler.on_result(refs.pop(ref), ray.get(ref))

Learning is not planned here: learners pull from the buffer at their own pace, and what they
learned comes back as ``learned`` results (:meth:`Scheduler.on_result`). A member collects
until its env steps reach its ``boundary`` (the next evolution step); once its last chunk is
stored it is settled (a ``settle`` call: its learner learns what its data earned and
publishes), then it waits (:meth:`Scheduler.at_boundary`). The family's rules (steps per
call, the lag bound) come from the data path (:mod:`distmarl.runtime.logic.datapath`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from distmarl.runtime.logic.datapath import DataPath, Started
from distmarl.runtime.logic.run_state import RUN, WAIT, MemberState, RunState


@dataclass(frozen=True)
class Call:
    """One actor call, or what a learner said: ``collect(member, worker, steps, version)``
    on one of the member's rollout workers (``steps`` vectorised steps acting with weights
    ``version``); ``settle(member)`` on its learner at its boundary; ``learned``: the
    member's learner reporting updates it did (not a call the scheduler plans)."""

    kind: Literal["collect", "settle", "learned"]
    member: int
    worker: int = -1
    steps: int = 0
    version: int = 0


class Collected(Protocol):
    """What a finished collect call reports (the rollout worker's result)."""

    @property
    def env_steps(self) -> int: ...

    @property
    def version(self) -> int: ...


class Learned(Protocol):
    """What a learner says it did (a ``settle`` call's result, or a report): ``weights`` is
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
        self.collecting: dict[tuple[int, int], Started] = {}
        #: members whose settle call is in flight, and those settled since their last boundary
        self.settling: set[int] = set()
        self.settled: set[int] = set()

    # ------------------------------------------------------------------ planning
    def next_calls(self) -> list[Call]:
        """Every call that may start now; each is counted as in flight from here on."""
        calls: list[Call] = []
        for m in self.state.members:
            if m.phase != RUN:
                continue
            if self._may_settle(m):
                self.settling.add(m.member)
                calls.append(Call("settle", m.member))
            steps = self.path.collect_steps(m)
            for w in range(self.workers):
                if (m.member, w) in self.collecting or m.scheduled_steps >= m.boundary:
                    continue
                if not self.path.may_collect(m, self._started(m.member), self.workers):
                    break  # the learner is behind: keep the policy lag bounded
                m.scheduled_steps += steps * self.num_envs
                self.collecting[(m.member, w)] = (m.updates, m.version)
                calls.append(Call("collect", m.member, w, steps=steps, version=m.version))
        return calls

    def _may_settle(self, m: MemberState) -> bool:
        """Its boundary reached, its chunks all stored, not settled yet."""
        return (m.env_steps >= m.boundary and not self._started(m.member)
                and m.member not in self.settling and m.member not in self.settled)

    def _started(self, member: int) -> list[Started]:
        return [self.collecting[(member, w)] for w in range(self.workers)
                if (member, w) in self.collecting]

    # ------------------------------------------------------------------ results
    def on_result(self, call: Call, result: Collected | Learned) -> None:
        """Account for a finished call or a learner's report (``result``: its value)."""
        m = self.state.members[call.member]
        if call.kind == "collect":
            self._collected(m, call, cast(Collected, result))
            return
        if call.kind == "settle":
            self.settling.discard(m.member)
            self.settled.add(m.member)
        self._learned(m, cast(Learned, result))

    def _collected(self, m: MemberState, call: Call, result: Collected) -> None:
        del self.collecting[(m.member, call.worker)]
        m.scheduled_steps += result.env_steps - call.steps * self.num_envs
        m.env_steps += result.env_steps
        self.state.count_steps(result.env_steps)
        m.max_lag_seen = max(m.max_lag_seen, m.version - result.version)
        self.path.on_collected(m)

    def _learned(self, m: MemberState, result: Learned) -> None:
        m.updates += result.updates
        self.path.on_learned(m, result.updates)
        if result.weights is not None and result.weights[0] > m.version:
            m.set_weights(*result.weights)
        elif result.updates:
            m.published_latest = False

    def on_failure(self, call: Call) -> int:
        """Account for a call that failed (its actor died, or an actor it called): a lost
        chunk's steps are scheduled again, a lost settle call is made again. Returns the env
        steps lost (collect; 0 otherwise)."""
        m = self.state.members[call.member]
        if call.kind == "collect":
            del self.collecting[(m.member, call.worker)]
            lost = call.steps * self.num_envs
            m.scheduled_steps -= lost
            return lost
        self.settling.discard(m.member)
        m.published_latest = False  # it may have learned before it failed
        return 0

    def forget_owed(self, members: Sequence[int]) -> None:
        """The members' learners dropped their waiting fragments: nothing is owed."""
        for member in members:
            self.state.members[member].owed = 0.0

    # ------------------------------------------------------------------ phases
    def idle(self, member: int) -> bool:
        """No call of ``member`` in flight."""
        return member not in self.settling and not self._started(member)

    def at_boundary(self, member: int) -> bool:
        """True when ``member`` just reached its boundary, settled and with nothing in flight;
        it then waits (phase ``WAIT``) for its evolution step."""
        m = self.state.members[member]
        if m.phase == RUN and m.env_steps >= m.boundary and member in self.settled \
                and self.idle(member):
            self.settled.discard(member)
            m.phase = WAIT
            return True
        return False
