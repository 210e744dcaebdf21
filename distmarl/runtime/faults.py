"""Keeping a run alive when actors die: what the coordinator does, and what it counts.

* A rollout worker dies: Ray restarts it (``max_restarts``); its next ``collect`` call carries
  the member's latest weights, so it goes on; the chunk that was in flight is lost and counted.
  A restart shows as a new pid: after any failed ``collect`` call, and every
  :data:`CENSUS_INTERVAL_S` for all workers (a worker that died while idle fails no call).
* A learner dies: Ray restarts it and the coordinator loads the member's last state snapshot
  (an object it owns, refreshed every few train calls and after every generation).
* The buffer dies: Ray restarts it empty and the coordinator loads its latest snapshot (taken
  every ``buffer.snapshot_interval_s``); the rows added since are lost and counted.
* A node dies (with whatever actors ran there): Ray restarts them on the nodes left, and each
  is handled as above. A snapshot is an actor's return value, stored first on the actor's own
  node, so it would die with the node: once it is ready the coordinator copies it to its own
  node (``ray.get`` then ``ray.put``, see :meth:`Snapshots.settle`) and restores from that copy.
  Until then the latest snapshot is used where it lies, and the previous copy when it is lost.

On-policy members (whose learners read each fragment of their own once) are resynchronised
after a fault that may leave fragments in the buffer that the coordinator does not count (a
worker that died after its write, a buffer restored from an older snapshot): the learner
discards its member's waiting fragments and the member owes no update (:func:`resync_on_policy`).

Every counter of the run only moves forward; the summary lists restarts and losses.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import (
    GetTimeoutError,
    ObjectLostError,
    RayActorError,
    RayError,
    RayTaskError,
)

if TYPE_CHECKING:
    from distmarl.runtime.coordinator import Coordinator

log = logging.getLogger(__name__)

#: restart every dead actor, however often; a call in flight is not retried (it is counted)
ACTOR_OPTIONS = {"max_restarts": -1, "max_task_retries": 0}
MAX_FAILURES = 50
#: seconds between two rounds of asking every rollout worker its pid (see census_workers)
CENSUS_INTERVAL_S = 5.0


@dataclass
class FaultLog:
    worker_restarts: int = 0
    lost_chunks: int = 0
    lost_env_steps: int = 0
    learner_restarts: int = 0
    lost_updates: int = 0
    buffer_restarts: int = 0
    buffer_lost_rows: int = 0
    failures: int = 0
    dropped_nonfinite_rows: int = 0  # agent rows with NaN / inf the envs dropped ("drop" mode)

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Snapshots:
    """Objects the coordinator owns, so they outlive the actors they came from.

    Buffer snapshots (every ``interval_s``) and learner states (:func:`snapshot_learner`) are
    taken as actor calls whose results lie on the actor's node; :meth:`settle` copies each one
    that is ready to the coordinator's node, so that losing the actor's node loses no snapshot.
    ``buffer`` and ``previous`` are the last two copies of the buffer; ``learners[slot]`` the
    last copy of a member's state."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.buffer: Any = None
        self.previous: Any = None
        self.buffer_taken = 0.0
        self.buffer_incarnation: str | None = None
        self.buffer_pending: Any = None
        self.learner_pending: dict[int, Any] = {}
        self.learners: dict[int, Any] = {}
        self.census: dict[tuple[int, int], Any] = {}
        self.census_taken = time.monotonic()

    def maybe_snapshot_buffer(self, coord: Coordinator, force: bool = False) -> None:
        """Called on every turn of the coordinator's loop: copy finished snapshots here, look
        for restarted workers (:func:`census_workers`), and ask the buffer for its state when
        ``interval_s`` has passed (or ``force``). Only that last step waits for an actor (the
        buffer's incarnation, :func:`check_buffer`)."""
        self.settle(coord)
        census_workers(coord)
        if self.interval_s <= 0 and not force:
            return
        if force or time.monotonic() - self.buffer_taken >= self.interval_s:
            if check_buffer(coord):
                return
            if self.buffer_pending is None:  # one at a time: a slow copy is not stacked
                self.buffer_pending = coord.buffer.state_dict.remote()
            self.buffer_taken = time.monotonic()

    def settle(self, coord: Coordinator) -> None:
        """Copy every snapshot that is ready to this (the coordinator's) node; one that failed
        (its actor died while taking it) is dropped and the older copy stays."""
        waiting = [ref for ref in [self.buffer_pending, *self.learner_pending.values()]
                   if ref is not None]
        if not waiting:
            return
        ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
        if self.buffer_pending is not None and self.buffer_pending in ready:
            local = _copy_here(self.buffer_pending, "buffer")
            if local is not None:
                self.previous, self.buffer = self.buffer, local
            self.buffer_pending = None
        for slot, ref in list(self.learner_pending.items()):
            if ref in ready:
                del self.learner_pending[slot]
                local = _copy_here(ref, f"learner {slot}")
                if local is not None:
                    self.learners[slot] = local
                m = coord.members[slot]
                if m.state_ref is ref:  # the latest is now the copy (or, failed, the last one)
                    m.state_ref = local if local is not None else self.learners.get(slot)


def _copy_here(ref: Any, what: str) -> Any:
    """``ray.put(ray.get(ref))``: a copy owned and stored by this process's node; None when the
    call behind ``ref`` failed."""
    try:
        value = ray.get(ref, timeout=60)
    except (RayError, GetTimeoutError) as err:
        log.warning("%s snapshot failed (%s); the previous one is kept", what, type(err).__name__)
        return None
    return ray.put(value)


def check_buffer(coord: Coordinator) -> bool:
    """True when the buffer restarted (it was then restored from the latest snapshot)."""
    snaps: Snapshots = coord.snapshots
    try:
        incarnation = get_with_retry(coord.buffer.incarnation.remote)
    except (RayActorError, GetTimeoutError) as err:
        raise RuntimeError(f"the replay buffer actor is gone and did not come back: {err}") from err
    if snaps.buffer_incarnation is None:
        snaps.buffer_incarnation = incarnation
        return False
    if incarnation == snaps.buffer_incarnation:
        return False
    coord.faults.buffer_restarts += 1
    snaps.settle(coord)
    load_first(coord.buffer.load_state_dict.remote, [snaps.buffer, snaps.previous], "buffer")
    counter = get_with_retry(coord.buffer.stats.remote)["counter"]
    lost = max(0, coord.buffer_rows - counter)
    coord.faults.buffer_lost_rows += lost
    coord.buffer_rows_restored = counter
    snaps.buffer_incarnation = incarnation
    log.warning("the replay buffer restarted: restored %d rows from its snapshot, %d rows lost",
                counter, lost)
    coord.events.append({"generation": coord.generation, "fault": "buffer restarted",
                         "restored_rows": counter, "lost_rows": lost})
    resync_on_policy(coord, list(range(len(coord.members))))
    return True


def on_failure(coord: Coordinator, kind: str, slot: int, worker: int, err: BaseException) -> None:
    """Account for a failed ``collect`` or ``train`` call; re-raise what is not a fault.

    An actor that died (or is restarting) is waited for until Ray has it back, so no further
    call is wasted on it; a restart shows as a new pid (workers) or incarnation (learners)."""
    faults: FaultLog = coord.faults
    faults.failures += 1
    if faults.failures > MAX_FAILURES:
        raise RuntimeError(f"{faults.failures} actor failures: giving up ({err})") from err
    m = coord.members[slot]
    buffer_restarted = check_buffer(coord)
    own_fault = isinstance(err, RayActorError) and not isinstance(err, RayTaskError)
    # a RayTaskError that is also a RayActorError: the call failed on an actor it called
    # (the buffer, dying or restarting); anything else is a real error and ends the run
    # or on weights whose owner (a learner that died) is gone
    downstream = isinstance(err, RayTaskError) and isinstance(err, RayActorError | ObjectLostError)
    if not (own_fault or downstream or buffer_restarted):
        raise err
    if kind == "collect":
        chunk = coord.collect_steps(m) * coord.cfg.env.num_envs
        m.scheduled_steps -= chunk
        faults.lost_chunks += 1
        faults.lost_env_steps += chunk
        check_worker(coord, slot, worker)  # it may have died too, after its call failed
        check_learners(coord, [slot])  # a dead learner's weights die with it: republish
        resync_on_policy(coord, [slot])  # the lost fragment may have reached the buffer
    elif kind == "train":
        m.owed += m.requested
        faults.lost_updates += m.requested
        m.requested = 0
        check_learners(coord, [slot])


def resync_on_policy(coord: Coordinator, slots: list[int]) -> None:
    """On-policy only: each slot's learner discards the fragments waiting for it and the
    member owes no update (fragments arriving later are counted as usual)."""
    if not getattr(coord, "on_policy", False):
        return
    for slot in slots:
        discarded = get_with_retry(coord.learners[slot].discard_pending.remote)
        coord.members[slot].owed = 0.0
        if discarded:
            log.warning("member %d: discarded %d rows of fragments after a fault", slot,
                        discarded)


def check_worker(coord: Coordinator, slot: int, worker: int) -> None:
    """Wait until the worker answers again; count a restart when its pid changed."""
    pid = get_with_retry(coord.workers[slot][worker].info.remote)["pid"]
    note_worker_pid(coord, slot, worker, pid)


def note_worker_pid(coord: Coordinator, slot: int, worker: int, pid: int) -> None:
    """Remember a worker's pid; a new one means Ray restarted it: counted and logged."""
    known = coord.worker_pids.get((slot, worker))
    if known is not None and pid != known:
        coord.faults.worker_restarts += 1
        coord.events.append({"generation": coord.generation, "fault": "worker restarted",
                             "slot": slot, "worker": worker})
        log.warning("rollout worker %d/%d restarted", slot, worker)
    coord.worker_pids[(slot, worker)] = pid


def census_workers(coord: Coordinator) -> None:
    """Every :data:`CENSUS_INTERVAL_S`, ask every rollout worker its pid without waiting; the
    answers are read on later turns as they come. A worker that died between calls (idle,
    or after its call had failed on another actor) shows up here."""
    snaps: Snapshots = coord.snapshots
    if snaps.census:
        ready, _ = ray.wait(list(snaps.census.values()), num_returns=len(snaps.census),
                            timeout=0)
        for key, ref in list(snaps.census.items()):
            if ref in ready:
                del snaps.census[key]
                try:
                    note_worker_pid(coord, *key, ray.get(ref)["pid"])
                except RayError:  # it died meanwhile: a later census or failed call sees it
                    pass
    if not snaps.census and time.monotonic() - snaps.census_taken >= CENSUS_INTERVAL_S:
        snaps.census = {(slot, w): worker.info.remote()
                        for slot, workers in enumerate(coord.workers)
                        for w, worker in enumerate(workers)}
        snaps.census_taken = time.monotonic()


def get_with_retry(submit: Any, attempts: int = 120, delay_s: float = 0.5) -> Any:
    """``ray.get(submit())``, submitting again while the actor is restarting or just died
    (Ray brings it back); errors raised by the actor's own code are not retried."""
    for attempt in range(attempts):
        try:
            return ray.get(submit(), timeout=600)
        except RayActorError:
            if attempt == attempts - 1:
                raise
            time.sleep(delay_s)
    raise AssertionError("unreachable")


def check_learners(coord: Coordinator, slots: list[int] | None = None) -> None:
    """Restore every learner that Ray restarted since we last looked (it holds fresh weights)."""
    for slot in range(len(coord.learners)) if slots is None else slots:
        m = coord.members[slot]
        incarnation = get_with_retry(coord.learners[slot].incarnation.remote)
        if m.learner_incarnation is None:
            m.learner_incarnation = incarnation
        elif incarnation != m.learner_incarnation:
            coord.faults.learner_restarts += 1
            restored = restore_learner(coord, slot)
            coord.events.append({"generation": coord.generation, "fault": "learner restarted",
                                 "slot": slot, "restored": restored})
            log.warning("learner %d restarted and was restored from its last snapshot", slot)


def restore_learner(coord: Coordinator, slot: int) -> bool:
    """Load the member's last state snapshot into its (restarted) learner and republish.
    The latest snapshot is tried first, then the last copy on the coordinator's node (the
    latest may have been lost with the learner's node). False when neither could be loaded
    (the learner goes on from a fresh state; the member stays in the population)."""
    m = coord.members[slot]
    learner = coord.learners[slot]
    coord.snapshots.settle(coord)
    restored, hp = load_first(learner.load_state.remote,
                              [m.state_ref, coord.snapshots.learners.get(slot)], f"learner {slot}")
    m.hp = hp if restored else get_with_retry(learner.hyperparameters.remote)
    m.version, m.weights_box = get_with_retry(learner.publish.remote)
    m.learner_incarnation = get_with_retry(learner.incarnation.remote)
    return restored


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


def actor_died(err: BaseException) -> bool:
    """The called actor itself died (not an exception raised by its code)."""
    return isinstance(err, RayActorError) and not isinstance(err, RayTaskError)


def snapshot_learner(coord: Coordinator, slot: int) -> None:
    """Keep the member's latest full state as an object the coordinator owns (copied to the
    coordinator's node by :meth:`Snapshots.settle` once it is ready)."""
    ref = coord.learners[slot].get_state.remote()
    coord.members[slot].state_ref = ref
    coord.snapshots.learner_pending[slot] = ref
