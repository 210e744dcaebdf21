"""Keeping a Ray fleet's actors alive (:class:`FaultKeeping`, a part of
:class:`~distmarl.runtime.fleets.ray_fleet.RayFleet`): restarts, snapshots, what was lost.

* A rollout worker dies: Ray restarts it (``max_restarts``); its next ``collect`` call carries
  the member's latest weights, so it goes on; the chunk that was in flight is lost and counted.
  A restart shows as a new pid: after any failed ``collect`` call, and every
  :data:`CENSUS_INTERVAL_S` for all workers (a worker that died while idle fails no call).
* A learner dies: Ray restarts it and the fleet loads the member's last state snapshot (an
  object the coordinator owns, refreshed every :data:`STATE_SNAPSHOT_UPDATES` updates and
  after every generation); the updates since are lost and counted. Its host learns again.
* The buffer (a replay shard) dies: Ray restarts it empty and the fleet loads its latest
  snapshot (taken every ``buffer.snapshot_interval_s``); the rows added since are lost and
  counted. The other shards go on.
* A node dies (with whatever actors ran there): Ray restarts them on the nodes left, and each
  is handled as above, from the snapshots' copies on the coordinator's node
  (:mod:`distmarl.runtime.fleets.snapshots`).

When the data path resynchronises fragments (on-policy), a fault that may leave fragments in
the buffer that the scheduler did not count (a worker that died after its write, a buffer
restored from an older snapshot) makes the member's learner discard its waiting fragments, and
the member owes no update (:meth:`FaultKeeping.resync`). Every counter only moves forward.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayError, RayTaskError

from distmarl.runtime.fleets.protocol import FaultLog
from distmarl.runtime.fleets.snapshots import Snapshots, load_first
from distmarl.runtime.logic.datapath import DataPath
from distmarl.runtime.logic.run_state import RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler

log = logging.getLogger(__name__)

MAX_FAILURES = 50
#: seconds between two rounds of asking every rollout worker its pid (see FaultKeeping.tick)
CENSUS_INTERVAL_S = 5.0
#: updates between snapshots of a learner's full state
STATE_SNAPSHOT_UPDATES = 512
#: What a lost actor or node raises: the actor itself, or an object it owned (published
#: weights, a state) that died with it (``OwnerDiedError`` is an ``ObjectLostError``).
LOST = (RayActorError, ObjectLostError)


def get_with_retry(submit: Callable[[], Any], attempts: int = 120, delay_s: float = 0.5) -> Any:
    """``ray.get(submit())``, submitting again while the actor is restarting or just died
    (Ray brings it back), or when its reply was lost with a node that died after it answered
    (every call made this way only reads, or may be made twice); errors raised by the actor's
    own code are not retried."""
    for attempt in range(attempts):
        try:
            return ray.get(submit(), timeout=600)
        except LOST:
            if attempt == attempts - 1:
                raise
            time.sleep(delay_s)
    raise AssertionError("unreachable")


def gather_with_retry(submits: Sequence[Callable[[], Any]]) -> list[Any]:
    """``[ray.get(submit()) for submit in submits]``, the calls made together; one whose actor
    just died or is restarting, or whose reply was lost, is made again (:func:`get_with_retry`)."""
    refs = [submit() for submit in submits]
    out = []
    for submit, ref in zip(submits, refs):
        try:
            out.append(ray.get(ref, timeout=600))
        except LOST:
            out.append(get_with_retry(submit))
    return out


class FaultKeeping:
    """Restarts and snapshots of a fleet's replay ``shards``, ``learners`` and ``workers`` (Ray
    actor handles, set by the fleet), counted in ``faults``; events go to ``state``, a resync of
    fragments clears the member's owed updates in ``scheduler``."""

    shards: list[Any]
    learners: list[Any]
    workers: list[list[Any]]
    path: DataPath
    state: RunState
    scheduler: Scheduler

    def __init__(self, snapshot_interval_s: float) -> None:
        self.faults = FaultLog()
        self.snapshots = Snapshots(snapshot_interval_s)
        self.buffer_incarnations: list[str] = []  # each shard's, once first asked
        self.learner_incarnations: dict[int, str] = {}
        #: each member's earlier incarnations (learners Ray restarted, since restored)
        self.retired_incarnations: dict[int, set[str]] = {}
        self.worker_pids: dict[tuple[int, int], int] = {}
        self.census: dict[tuple[int, int], Any] = {}
        self.census_taken = time.monotonic()
        #: each member's updates since its last snapshot (lost if its learner dies)
        self.since_snapshot: dict[int, int] = {}

    def tick(self, force_snapshot: bool = False) -> None:
        """Called on every turn of the coordinator's loop: copy finished snapshots here, look
        for restarted workers, and ask the buffer for its state when one is due. Only that
        last step waits for an actor (the buffer's incarnation)."""
        self.snapshots.settle()
        self._census()
        if self.snapshots.buffer_due(force_snapshot) and not self.check_buffer():
            self.snapshots.take_buffers([shard.state_dict.remote for shard in self.shards])

    def trained(self, member: int, result: Any) -> bool:
        """``member``'s learner said what it learned (``result``: updates, incarnation):
        False when the learner restarted since (it was then restored); every
        :data:`STATE_SNAPSHOT_UPDATES` updates, snapshot its state."""
        if self.note_incarnation(member, result.incarnation):
            return False
        self.since_snapshot[member] = self.since_snapshot.get(member, 0) + result.updates
        if self.since_snapshot[member] >= STATE_SNAPSHOT_UPDATES:
            self.snapshot_learner(member)
        return True

    # ------------------------------------------------------------------ faults
    def on_failure(self, call: Call, lost: int, err: BaseException) -> None:
        """Account for a failed call (``lost``: its env steps or updates, as the scheduler
        counted them); re-raise what is not a fault. An actor that died (or is restarting) is
        waited for until Ray has it back, so no further call is wasted on it."""
        self.faults.failures += 1
        if self.faults.failures > MAX_FAILURES:
            raise RuntimeError(f"{self.faults.failures} actor failures: giving up ({err})") from err
        buffer_restarted = self.check_buffer()
        own_fault = isinstance(err, RayActorError) and not isinstance(err, RayTaskError)
        # a RayTaskError that is also a RayActorError: the call failed on an actor it called
        # (the buffer, dying or restarting), or on weights whose owner (a learner) is gone;
        # anything else is a real error and ends the run
        downstream = (isinstance(err, RayTaskError)
                      and isinstance(err, RayActorError | ObjectLostError))
        if not (own_fault or downstream or buffer_restarted):
            raise err
        if call.kind == "collect":
            self.faults.lost_chunks += 1
            self.faults.lost_env_steps += lost
            self.check_worker(call.member, call.worker)  # it may have died too
            self.check_learners([call.member])  # a dead learner's weights die with it
            self.resync([call.member])  # the lost fragment may have reached the buffer
        else:
            self.check_learners([call.member])

    def host_failed(self, members: Sequence[int], err: BaseException) -> None:
        """A learner host's report failed: it died (its ``members``' updates since their
        snapshots are lost; each is restored, and its host learns again), or its rounds
        failed, which ends the run."""
        self.faults.failures += 1
        if self.faults.failures > MAX_FAILURES:
            raise RuntimeError(f"{self.faults.failures} actor failures: giving up ({err})") from err
        if not isinstance(err, RayActorError) or isinstance(err, RayTaskError):
            raise err
        self.faults.lost_updates += sum(self.since_snapshot.pop(m, 0) for m in members)
        self.check_learners(members)

    def check_buffer(self) -> bool:
        """True when a replay shard restarted (each that did was then restored from its latest
        snapshot; the rows lost are those the run stored that no shard holds now)."""
        try:
            incarnations = gather_with_retry([shard.incarnation.remote for shard in self.shards])
        except (RayActorError, GetTimeoutError) as err:
            raise RuntimeError(f"a replay buffer actor is gone and did not come back: {err}"
                               ) from err
        if not self.buffer_incarnations:
            self.buffer_incarnations = incarnations
            return False
        restarted = [s for s, (now, was) in enumerate(zip(incarnations, self.buffer_incarnations))
                     if now != was]
        if not restarted:
            return False
        for s in restarted:
            self.faults.buffer_restarts += 1
            load_first(self.shards[s].load_state_dict.remote, self.snapshots.buffer_candidates(s),
                       f"buffer shard {s}")
        counters = [int(c["counter"]) for c in
                    gather_with_retry([shard.stats.remote for shard in self.shards])]
        lost = max(0, self.state.buffer_rows - sum(counters) - self.faults.buffer_lost_rows)
        self.faults.buffer_lost_rows += lost
        self.buffer_incarnations = incarnations
        restored = sum(counters[s] for s in restarted)
        log.warning("the replay buffer restarted (shards %s): restored %d rows from snapshots, "
                    "%d rows lost", restarted, restored, lost)
        self.state.event(fault="buffer restarted", shards=restarted, restored_rows=restored,
                         lost_rows=lost)
        self.resync(list(range(len(self.learners))))
        return True

    def check_learners(self, members: Sequence[int] | None = None) -> None:
        """Ask ``members``' learners (default: all) their incarnations, together, and restore
        every one Ray restarted since we last looked (it holds fresh weights)."""
        members = range(len(self.learners)) if members is None else members
        incarnations = gather_with_retry([self.learners[m].incarnation.remote for m in members])
        for member, incarnation in zip(members, incarnations):
            self.note_incarnation(member, incarnation)

    def note_incarnation(self, member: int, incarnation: str) -> bool:
        """A reply of ``member``'s learner carried ``incarnation`` (a train result, published
        weights): True when the reply is not from the learner as it is now, so it is to be
        dropped. Either Ray restarted the learner since we last looked (it is then restored
        from its snapshot, which republishes its weights), or the reply came from an
        incarnation already replaced (sent before a restart that was dealt with)."""
        known = self.learner_incarnations.get(member)
        if known is None:
            self.learner_incarnations[member] = incarnation
            return False
        if incarnation == known:
            return False
        if incarnation in self.retired_incarnations.get(member, ()):
            return True
        self.retired_incarnations.setdefault(member, set()).add(known)
        self.learner_incarnations[member] = incarnation
        self.faults.learner_restarts += 1
        restored = self.restore_learner(member)
        self.state.event(fault="learner restarted", member=member, restored=restored)
        log.warning("learner %d restarted and was restored from its last snapshot", member)
        return True

    def restore_learner(self, member: int) -> bool:
        """Load the member's last state snapshot into its (restarted) learner and republish.
        The latest snapshot is tried first, then the last copy on the coordinator's node.
        False when neither could be loaded (the learner goes on from a fresh state)."""
        m, learner = self.state.members[member], self.learners[member]
        restored, hp = load_first(learner.load_state.remote,
                                  self.snapshots.learner_candidates(member), f"learner {member}")
        m.hp = hp if restored else get_with_retry(learner.hyperparameters.remote)
        published = get_with_retry(learner.publish.remote)
        m.set_weights(published.version, published.box)
        known = self.learner_incarnations.get(member)
        if known is not None and known != published.incarnation:
            self.retired_incarnations.setdefault(member, set()).add(known)
        self.learner_incarnations[member] = published.incarnation
        return restored

    def snapshot_learner(self, member: int) -> None:
        """Keep the member's latest full state as an object the coordinator owns."""
        self.snapshots.take_learner(member, self.learners[member].get_state.remote())
        self.since_snapshot[member] = 0

    def resync(self, members: Sequence[int]) -> None:
        """When the data path resynchronises fragments: each member's learner discards the
        fragments waiting for it and the member owes no update."""
        if not self.path.resyncs_fragments:
            return
        for member in members:
            discarded = get_with_retry(self.learners[member].discard_pending.remote)
            if discarded:
                log.warning("member %d: discarded %d rows of fragments after a fault", member,
                            discarded)
        self.scheduler.forget_owed(members)

    def check_worker(self, member: int, worker: int) -> None:
        """Wait until the worker answers again; count a restart when its pid changed."""
        self._note_pid(member, worker, get_with_retry(self.workers[member][worker].info.remote)["pid"])

    def _note_pid(self, member: int, worker: int, pid: int) -> None:
        known = self.worker_pids.get((member, worker))
        if known is not None and pid != known:
            self.faults.worker_restarts += 1
            self.state.event(fault="worker restarted", member=member, worker=worker)
            log.warning("rollout worker %d/%d restarted", member, worker)
        self.worker_pids[(member, worker)] = pid

    def _census(self) -> None:
        """Every :data:`CENSUS_INTERVAL_S`, ask every rollout worker its pid without waiting;
        the answers are read on later turns as they come. A worker that died between calls
        (idle, or after its call had failed on another actor) shows up here."""
        if self.census:
            ready, _ = ray.wait(list(self.census.values()), num_returns=len(self.census),
                                timeout=0)
            for key, ref in list(self.census.items()):
                if ref in ready:
                    del self.census[key]
                    # one that died meanwhile is seen by a later census or a failed call
                    with contextlib.suppress(RayError):
                        self._note_pid(*key, ray.get(ref)["pid"])
        if not self.census and time.monotonic() - self.census_taken >= CENSUS_INTERVAL_S:
            self.census = {(member, w): worker.info.remote()
                           for member, workers in enumerate(self.workers)
                           for w, worker in enumerate(workers)}
            self.census_taken = time.monotonic()
