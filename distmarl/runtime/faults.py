"""Keeping a run alive when actors die: what the coordinator does, and what it counts.

* A rollout worker dies: Ray restarts it (``max_restarts``); its next ``collect`` call carries
  the member's latest weights, so it goes on; the chunk that was in flight is lost and counted.
* A learner dies: Ray restarts it and the coordinator loads the member's last state snapshot
  (an object it owns, refreshed every few train calls and after every generation).
* The buffer dies: Ray restarts it empty and the coordinator loads its latest snapshot (taken
  every ``buffer.snapshot_interval_s``); the rows added since are lost and counted.

Every counter of the run only moves forward; the summary lists restarts and losses.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayTaskError

if TYPE_CHECKING:
    from distmarl.runtime.coordinator import Coordinator

log = logging.getLogger(__name__)

#: restart every dead actor, however often; a call in flight is not retried (it is counted)
ACTOR_OPTIONS = {"max_restarts": -1, "max_task_retries": 0}
MAX_FAILURES = 50


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

    def to_json(self) -> dict[str, int]:
        return asdict(self)


class Snapshots:
    """Objects the coordinator owns, so they outlive the actors they came from."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.buffer: Any = None
        self.previous: Any = None
        self.buffer_taken = 0.0
        self.buffer_incarnation: str | None = None

    def maybe_snapshot_buffer(self, coord: Coordinator, force: bool = False) -> None:
        """Ask the buffer for its state (an object the coordinator owns). The last two are
        kept: one taken while the buffer was dying holds an error, and the older one is used."""
        if self.interval_s <= 0 and not force:
            return
        if force or time.monotonic() - self.buffer_taken >= self.interval_s:
            if check_buffer(coord):
                return
            self.previous, self.buffer = self.buffer, coord.buffer.state_dict.remote()
            self.buffer_taken = time.monotonic()


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
    for snapshot in (snaps.buffer, snaps.previous):
        if snapshot is None:
            continue
        try:
            get_with_retry(lambda s=snapshot: coord.buffer.load_state_dict.remote(s))
            break
        except RayTaskError as err:  # the snapshot itself failed (taken as the buffer died)
            log.warning("buffer snapshot unusable (%s); trying an older one", type(err).__name__)
    counter = get_with_retry(coord.buffer.stats.remote)["counter"]
    lost = max(0, coord.buffer_rows - counter)
    coord.faults.buffer_lost_rows += lost
    coord.buffer_rows_restored = counter
    snaps.buffer_incarnation = incarnation
    log.warning("the replay buffer restarted: restored %d rows from its snapshot, %d rows lost",
                counter, lost)
    coord.events.append({"generation": coord.generation, "fault": "buffer restarted",
                         "restored_rows": counter, "lost_rows": lost})
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
        chunk = coord.cfg.training.chunk_steps * coord.cfg.env.num_envs
        m.scheduled_steps -= chunk
        faults.lost_chunks += 1
        faults.lost_env_steps += chunk
        if own_fault:
            check_worker(coord, slot, worker)
        check_learners(coord, [slot])  # a dead learner's weights die with it: republish
    elif kind == "train":
        m.owed += m.requested
        faults.lost_updates += m.requested
        m.requested = 0
        check_learners(coord, [slot])


def check_worker(coord: Coordinator, slot: int, worker: int) -> None:
    """Wait until the worker answers again; count a restart when its pid changed."""
    pid = get_with_retry(coord.workers[slot][worker].info.remote)["pid"]
    known = coord.worker_pids.get((slot, worker))
    if known is not None and pid != known:
        coord.faults.worker_restarts += 1
        coord.events.append({"generation": coord.generation, "fault": "worker restarted",
                             "slot": slot, "worker": worker})
        log.warning("rollout worker %d/%d restarted", slot, worker)
    coord.worker_pids[(slot, worker)] = pid


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
            restore_learner(coord, slot)
            coord.events.append({"generation": coord.generation, "fault": "learner restarted",
                                 "slot": slot, "restored": m.state_ref is not None})
            log.warning("learner %d restarted and was restored from its last snapshot", slot)


def restore_learner(coord: Coordinator, slot: int) -> None:
    """Load the member's last state snapshot into its (restarted) learner and republish."""
    m = coord.members[slot]
    learner = coord.learners[slot]
    if m.state_ref is not None:
        m.hp = get_with_retry(lambda: learner.load_state.remote(m.state_ref))
    m.version, m.weights_box = get_with_retry(learner.publish.remote)
    m.learner_incarnation = get_with_retry(learner.incarnation.remote)


def actor_died(err: BaseException) -> bool:
    """The called actor itself died (not an exception raised by its code)."""
    return isinstance(err, RayActorError) and not isinstance(err, RayTaskError)


def snapshot_learner(coord: Coordinator, slot: int) -> None:
    """Keep the member's latest full state as an object the coordinator owns."""
    coord.members[slot].state_ref = coord.learners[slot].get_state.remote()
