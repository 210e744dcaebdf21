"""``HostActor``: the learner process of a group of members (and, colocated, their workers 0).

A learner's process imports torch and builds its member's networks, and a member's update of
small networks is mostly per-call overhead; so one process hosts the learners of a group of
members (``population.members_per_learner``), updated together
(:class:`~distmarl.runtime.actors.group.LearnerGroup`: members of one shape as one stacked
computation). With ``resources.colocate``, each hosted member's first rollout worker lives
there too: one process per group instead of two per member.

The learners pull: once started (:meth:`HostShell.start_learning`), a thread of the host runs
rounds for as long as the run goes, each learning what the buffer granted its members (the
update-to-data rule lives in the buffer), the next round's read on its way meanwhile; with
nothing granted it waits a little and asks again. No call paces it. What it learned reaches
the coordinator through :meth:`HostShell.report`, which answers as soon as there is
something to say (a long poll: one always in flight). At a member's boundary the coordinator
asks :meth:`HostShell.settle`: the member learns what its data earned, publishes, and says so.

Each member keeps its own objects (:class:`~distmarl.runtime.actors.learner.LearnerShell`,
:class:`~distmarl.runtime.actors.rollout.RolloutShell`), its own incarnation and its own
snapshots: the fleet holds the host once per member and role, through :class:`LearnerView`
and :class:`WorkerView`, and sees a crashed host as every hosted member's learner (and
colocated worker) restarted, restoring each as it would apart. The learners' calls (one at a
time, a Ray concurrency group) and the rounds take turns on the learners' state (a lock; a
call waiting goes first); a colocated worker's calls run in a thread of their own, and reports
in another (torch and env stepping in C release the GIL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ray
from ray.exceptions import RayError

from distmarl.runtime.actors.group import LearnerGroup
from distmarl.runtime.actors.learner import LearnerShell, TrainResult
from distmarl.runtime.actors.rollout import RolloutShell
from distmarl.runtime.logic.time_spent import CALL, WAITING_DATA, TimeSpent

log = logging.getLogger(__name__)

#: what may be called on each hosted member's learner and worker: the fleet's verbs, and what
#: tests read through the fleet's handles (``used_fragments``)
LEARNER_METHODS = frozenset({"incarnation", "discard_pending", "used_fragments", "publish",
                             "get_state", "load_state", "mutate", "hyperparameters",
                             "set_hyperparameters", "info"})
WORKER_METHODS = frozenset({"collect", "play", "evaluate", "score_fixed", "info"})
CONCURRENCY_GROUPS = {"learner": 1, "worker": 1, "report": 1}
#: the longest and shortest waits of a round that was granted nothing, before asking again
IDLE_S = (0.001, 0.02)
#: how long a report waits for something to say; after a read failed, the wait before the next
REPORT_WAIT_S = 1.0
READ_RETRY_S = 0.5


class HostShell:
    """The plain class behind :data:`HostActor`: one learner per ``learners`` item
    (:class:`LearnerShell`'s arguments) and one rollout worker per ``workers`` item
    (:class:`RolloutShell`'s; empty where workers run in processes of their own)."""

    def __init__(self, learners: Sequence[dict[str, Any]],
                 workers: Sequence[dict[str, Any]] = ()) -> None:
        shells = [LearnerShell(**kwargs) for kwargs in learners]
        self.learners = {s.member: s for s in shells}
        self.group = LearnerGroup(shells)
        self.workers = {kw["member"]: RolloutShell(**kw) for kw in workers}
        self._lock = threading.Lock()  # the learners' state: a round or a call at a time
        self._calls_waiting = 0
        self._news = threading.Condition()  # guards the tally and the loop's failure
        self._tally: dict[int, TrainResult] = {}
        self._failure: BaseException | None = None
        self._loop: threading.Thread | None = None
        self._stop = threading.Event()
        #: members settled at their boundary whose data has not come again (an idle round
        #: of only those waits for the coordinator, not for data)
        self._settled: set[int] = set()

    # ------------------------------------------------------------------ the learning loop
    @ray.method(concurrency_group="learner")
    def start_learning(self) -> None:
        """Run rounds from now on, in a thread of their own (again after :meth:`stop_learning`)."""
        if self._loop is not None and self._loop.is_alive():
            return
        self._stop.clear()
        self._loop = threading.Thread(target=self._run, name="learning", daemon=True)
        self._loop.start()

    @ray.method(concurrency_group="learner")
    def stop_learning(self) -> dict[int, TrainResult]:
        """End the rounds; what they learned since the last report."""
        self._stop.set()
        if self._loop is not None:
            self._loop.join()
        return self._take()

    @ray.method(concurrency_group="report")
    def report(self, wait_s: float = REPORT_WAIT_S) -> dict[int, TrainResult]:
        """What each member learned since the last report, as soon as there is any (waiting
        up to ``wait_s``; empty when there is none). A failure of the rounds is raised here."""
        with self._news:
            self._news.wait_for(lambda: bool(self._tally) or self._failure is not None,
                                timeout=wait_s)
        return self._take()

    @ray.method(concurrency_group="learner")
    def settle(self, members: Sequence[int]) -> dict[int, TrainResult]:
        """``members`` at their boundary (their workers done): each learns what its data
        earned and publishes; everything each learned since the last report."""
        with self._turn():
            done = self.group.settle(members)
            self._settled.update(members)
        self._add({m: r for m, r in done.items() if m not in members and r.updates})
        with self._news:
            return {m: self._tally.pop(m, TrainResult(0, {}, 0.0, None)).then(done[m])
                    for m in members}

    def _run(self) -> None:
        idle = IDLE_S[0]
        while not self._stop.is_set():
            while self._calls_waiting:  # a call goes first
                time.sleep(0.0005)
            try:
                with self._lock:
                    results = self.group.pull()
            except RayError as err:  # the buffer restarting: the fleet restores it
                log.warning("a learners' read failed (%s): reading again", err)
                self.group.reads.forget()
                time.sleep(READ_RETRY_S)
                continue
            except BaseException as err:
                with self._news:
                    self._failure = err
                    self._news.notify_all()
                return
            learned = {m: r for m, r in results.items() if r.updates or r.weights}
            if learned:
                self._settled.difference_update(learned)
                self._add(learned)
                idle = IDLE_S[0]
                continue
            self._wait(idle)
            idle = min(2 * idle, IDLE_S[1])

    def _wait(self, seconds: float) -> None:
        """Nothing was granted: wait for data, or (every member settled) for the coordinator."""
        if self._settled >= set(self.learners):
            time.sleep(seconds)
            return
        ledger = self.group.ledger
        with ledger.spend(CALL), ledger.spend(WAITING_DATA):
            time.sleep(seconds)

    def _add(self, results: dict[int, TrainResult]) -> None:
        with self._news:
            for m, r in results.items():
                held = self._tally.get(m)
                self._tally[m] = r if held is None else held.then(r)
            self._news.notify_all()

    def _take(self) -> dict[int, TrainResult]:
        with self._news:
            if self._failure is not None:
                raise self._failure
            out, self._tally = self._tally, {}
            return out

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """The learners' state, before the next round (the learners' calls come from one
        thread: the count needs no lock of its own)."""
        self._calls_waiting += 1
        with self._lock:
            self._calls_waiting -= 1
            yield

    # ------------------------------------------------------------------ the roles' calls
    @ray.method(concurrency_group="learner")
    def learner(self, member: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``member``'s learner's ``method`` (one of :data:`LEARNER_METHODS`)."""
        if method not in LEARNER_METHODS:
            raise AttributeError(f"a learner has no method {method!r}")
        with self._turn(), self.group.ledger.spend(CALL):
            return getattr(self.learners[member], method)(*args, **kwargs)

    @ray.method(concurrency_group="learner")
    def start_clock(self) -> None:
        """Training starts: count the learners' and workers' time from now."""
        self.group.start_clock()
        for worker in self.workers.values():
            worker.start_clock()

    @ray.method(concurrency_group="learner")
    def time_spent(self) -> list[TimeSpent]:
        """The learners' ledger (one for the group) and each colocated worker's."""
        return [*self.group.time_spent(), *(t for w in self.workers.values()
                                            for t in w.time_spent())]

    @ray.method(concurrency_group="worker")
    def worker(self, member: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``member``'s colocated worker's ``method`` (one of :data:`WORKER_METHODS`)."""
        if method not in WORKER_METHODS:
            raise AttributeError(f"a rollout worker has no method {method!r}")
        return getattr(self.workers[member], method)(*args, **kwargs)


HostActor = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(HostShell)  # type: ignore[call-overload]


class _Bound:
    """One member's ``method`` on a host: ``.remote(*args)`` calls it through ``dispatch``."""

    def __init__(self, dispatch: Any, member: int, method: str) -> None:
        self.dispatch, self.member, self.method = dispatch, member, method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatch.remote(self.member, self.method, *args, **kwargs)


class _View:
    """A host actor as one of its members in one role: ``view.<method>.remote(...)`` calls
    the host's ``ROLE`` dispatcher for ``member``; only the role's ``METHODS`` exist."""

    ROLE: str
    NOUN: str
    METHODS: frozenset[str]

    def __init__(self, host: Any, member: int) -> None:
        self.host, self.member = host, member

    def __getattr__(self, name: str) -> _Bound:
        if name not in self.METHODS:
            raise AttributeError(f"{self.NOUN} has no method {name!r}")
        return _Bound(getattr(self.host, self.ROLE), self.member, name)


class LearnerView(_View):
    """A host actor as ``member``'s learner: ``view.publish.remote()`` and the like."""

    ROLE, NOUN, METHODS = "learner", "a learner", LEARNER_METHODS


class WorkerView(_View):
    """A host actor as ``member``'s colocated worker 0: ``view.collect.remote(...)``."""

    ROLE, NOUN, METHODS = "worker", "a rollout worker", WORKER_METHODS
