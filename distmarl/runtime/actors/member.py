"""``MemberActor``: a member's learner and its first rollout worker in one process.

Every actor process imports torch and builds its member's networks; where cores are few
(fewer than a learner and a worker per member), those processes cannot run at once anyway and
their start-up is most of a short run's. ``resources.colocate`` then puts each member's first
rollout worker in its learner's process: one process per member fewer.

The two roles keep their own objects (:class:`~distmarl.runtime.actors.learner.LearnerShell`,
:class:`~distmarl.runtime.actors.rollout.RolloutShell`) and run in two threads: each role's
calls run one at a time, in order, as in an actor of its own (a Ray concurrency group per
role), while a collect call and a train call run side by side (torch and env stepping in C
release the GIL). The coordinator holds the actor twice: as the member's learner, and through
:class:`WorkerView` as its worker 0 (the methods both roles have, ``info`` and ``close``, are
``worker_info`` / ``worker_close`` here). A crash restarts both roles; the fleet sees a new
learner incarnation and a new worker pid and restores each as it would apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ray

from distmarl.runtime.actors.learner import LearnerShell
from distmarl.runtime.actors.rollout import RolloutShell

#: public methods of each role; a worker method a learner also has gets the ``worker_`` name
LEARNER_METHODS = ("incarnation", "train", "discard_pending", "used_fragments", "publish",
                   "get_state", "load_state", "mutate", "hyperparameters",
                   "set_hyperparameters", "weights_checksum", "info")
WORKER_METHODS = {"collect": "collect", "play": "play", "seat": "seat", "evaluate": "evaluate",
                  "score_fixed": "score_fixed", "info": "worker_info", "close": "worker_close"}
CONCURRENCY_GROUPS = {"learner": 1, "worker": 1}


class MemberShell:
    """The plain class behind :data:`MemberActor`: ``learner_kwargs`` and ``worker_kwargs``
    are those of :class:`LearnerShell` and :class:`RolloutShell`."""

    def __init__(self, learner_kwargs: dict[str, Any], worker_kwargs: dict[str, Any]) -> None:
        self.learner = LearnerShell(**learner_kwargs)
        self.worker = RolloutShell(**worker_kwargs)


def _delegate(role: str, method: str, name: str) -> Callable[..., Any]:
    """``MemberShell.<name>``: the ``role``'s ``method``, in the role's concurrency group."""
    def call(self: MemberShell, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(self, role), method)(*args, **kwargs)

    call.__name__, call.__qualname__ = name, f"MemberShell.{name}"
    call.__doc__ = f"The {role}'s ``{method}``."
    return ray.method(concurrency_group=role)(call)


for _name in LEARNER_METHODS:
    setattr(MemberShell, _name, _delegate("learner", _name, _name))
for _name, _as in WORKER_METHODS.items():
    setattr(MemberShell, _as, _delegate("worker", _name, _as))

MemberActor = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(MemberShell)  # type: ignore[call-overload]


class WorkerView:
    """A member actor as its worker 0: the worker's method names, the member actor's calls."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> Any:
        if name not in WORKER_METHODS:
            raise AttributeError(f"a rollout worker has no method {name!r}")
        return getattr(self.actor, WORKER_METHODS[name])
