"""``HostActor``: the learner process of a group of members (and, colocated, their workers 0).

A learner's process imports torch and builds its member's networks, and a member's update of
small networks is mostly per-call overhead; so one process hosts the learners of a group of
members (``population.members_per_learner``), and their train calls are answered together
(:class:`~distmarl.runtime.actors.group.LearnerGroup`: members of one shape updated as one
stacked computation). With ``resources.colocate``, each hosted member's first rollout worker
lives there too: one process per group instead of two per member.

Each member keeps its own objects (:class:`~distmarl.runtime.actors.learner.LearnerShell`,
:class:`~distmarl.runtime.actors.rollout.RolloutShell`), its own incarnation and its own
snapshots: the fleet holds the host once per member and role, through :class:`LearnerView`
and :class:`WorkerView`, and sees a crashed host as every hosted member's learner (and
colocated worker) restarted, restoring each as it would apart. The two roles run in two
threads: each role's calls one at a time, in order (a Ray concurrency group per role), while a
collect call and a train call run side by side (torch and env stepping in C release the GIL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ray

from distmarl.runtime.actors.group import LearnerGroup
from distmarl.runtime.actors.learner import LearnerShell, TrainResult
from distmarl.runtime.actors.rollout import RolloutShell
from distmarl.runtime.logic.time_spent import CALL, TimeSpent

#: what may be called on each hosted member's learner and worker: the fleet's verbs (a
#: learner's train calls go through :meth:`HostShell.train_many`), and what tests read through
#: the fleet's handles (``used_fragments``)
LEARNER_METHODS = frozenset({"incarnation", "discard_pending", "used_fragments", "publish",
                             "get_state", "load_state", "mutate", "hyperparameters",
                             "set_hyperparameters", "info"})
WORKER_METHODS = frozenset({"collect", "play", "evaluate", "score_fixed", "info"})
CONCURRENCY_GROUPS = {"learner": 1, "worker": 1}


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

    @ray.method(concurrency_group="learner")
    def learner(self, member: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``member``'s learner's ``method`` (one of :data:`LEARNER_METHODS`)."""
        if method not in LEARNER_METHODS:
            raise AttributeError(f"a learner has no method {method!r}")
        with self.group.ledger.spend(CALL):
            return getattr(self.learners[member], method)(*args, **kwargs)

    @ray.method(concurrency_group="learner")
    def train_many(self, requests: Mapping[int, int]) -> dict[int, TrainResult]:
        """``requests[member]`` updates of each requested hosted member, together."""
        return self.group.train_many(requests)

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
