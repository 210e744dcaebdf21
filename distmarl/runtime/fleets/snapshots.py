"""Snapshots the coordinator owns, so they outlive the actors (and nodes) they came from.

A snapshot is an actor call's return value (a replay shard's ``state_dict``, a learner's
``get_state``), stored first on the actor's own node, so it would die with that node: once it
is ready :meth:`Snapshots.settle` copies it to the coordinator's node (``ray.get`` then
``ray.put``). Until then the latest snapshot is used where it lies, and the previous copy when
it is lost (:meth:`Snapshots.buffer_candidates`, :meth:`Snapshots.learner_candidates`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

log = logging.getLogger(__name__)


class Snapshots:
    """Each replay shard's last two copies and each member's latest learner state (the
    shards' taken every ``interval_s``; 0 takes none but forced ones)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.buffers: dict[int, Any] = {}  # each shard's last copy on this node
        self.previous: dict[int, Any] = {}  # each shard's copy before it
        self.buffer_pending: dict[int, Any] = {}  # shards' snapshots not copied yet
        self.buffer_taken = 0.0  # the first one is due at once
        self.learner_pending: dict[int, Any] = {}
        self.learner_copies: dict[int, Any] = {}
        self.learner_latest: dict[int, Any] = {}  # the latest state (a copy, or still pending)

    def buffer_due(self, force: bool = False) -> bool:
        """Whether the shards' snapshots are due (``interval_s`` passed, or ``force``)."""
        if self.interval_s <= 0 and not force:
            return False
        return force or time.monotonic() - self.buffer_taken >= self.interval_s

    def take_buffers(self, submits: list[Any]) -> None:
        """Ask shard ``s`` for a snapshot with ``submits[s]()`` unless its last one is still
        being taken (a slow copy is not stacked)."""
        for shard, submit in enumerate(submits):
            if shard not in self.buffer_pending:
                self.buffer_pending[shard] = submit()
        self.buffer_taken = time.monotonic()

    def take_learner(self, member: int, ref: Any) -> None:
        """``ref`` is the member's latest full state (a ``get_state`` call)."""
        self.learner_latest[member] = ref
        self.learner_pending[member] = ref

    def buffer_candidates(self, shard: int) -> list[Any]:
        """Shard ``shard``'s snapshots to restore from, newest first."""
        self.settle()
        return [self.buffers.get(shard), self.previous.get(shard)]

    def learner_candidates(self, member: int) -> list[Any]:
        """Member states to restore from, newest first."""
        self.settle()
        return [self.learner_latest.get(member), self.learner_copies.get(member)]

    def settle(self) -> None:
        """Copy every snapshot that is ready to this (the coordinator's) node; one that failed
        (its actor died while taking it) is dropped and the older copy stays."""
        waiting = [*self.buffer_pending.values(), *self.learner_pending.values()]
        if not waiting:
            return
        ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
        for shard, ref in list(self.buffer_pending.items()):
            if ref in ready:
                del self.buffer_pending[shard]
                copied = copy_here(ref, f"buffer shard {shard}")
                if copied is not None:
                    self.previous[shard] = self.buffers.get(shard)
                    self.buffers[shard] = copied
        for member, ref in list(self.learner_pending.items()):
            if ref in ready:
                del self.learner_pending[member]
                copied = copy_here(ref, f"learner {member}")
                if copied is not None:
                    self.learner_copies[member] = copied
                if self.learner_latest.get(member) is ref:  # the latest is now the copy
                    self.learner_latest[member] = (copied if copied is not None
                                                   else self.learner_copies.get(member))


def copy_here(ref: Any, what: str) -> Any:
    """``ray.put(ray.get(ref))``: a copy owned and stored by this process's node; None when the
    call behind ``ref`` failed."""
    try:
        value = ray.get(ref, timeout=60)
    except (RayError, GetTimeoutError) as err:
        log.warning("%s snapshot failed (%s); the previous one is kept", what, type(err).__name__)
        return None
    return ray.put(value)


def load_first(load: Any, snapshots: list[Any], what: str) -> tuple[bool, Any]:
    """``(True, ray.get(load(s)))`` for the first snapshot ``s`` (None entries skipped) that
    loads into the restarted actor; ``(False, None)`` when none does. A snapshot can fail to
    load when the call that took it failed, or when its node was lost before it was copied."""
    tried: list[Any] = []
    for snapshot in snapshots:
        if snapshot is None or any(snapshot is seen for seen in tried):
            continue
        tried.append(snapshot)
        try:
            return True, ray.get(load(snapshot), timeout=600)
        except (RayError, GetTimeoutError) as err:
            log.warning("%s: a snapshot could not be loaded (%s); trying an older one", what,
                        type(err).__name__)
    return False, None
