"""``RayFleet``: the run's actors on a Ray cluster, its calls in flight, keeping them alive.

* A rollout worker dies: Ray restarts it (``max_restarts``); its next ``collect`` call carries
  the member's latest weights, so it goes on; the chunk that was in flight is lost and counted.
  A restart shows as a new pid: after any failed ``collect`` call, and every
  :data:`CENSUS_INTERVAL_S` for all workers (a worker that died while idle fails no call).
* A learner dies: Ray restarts it and the fleet loads the member's last state snapshot (an
  object the coordinator owns, refreshed every :data:`STATE_SNAPSHOT_CALLS` train calls and
  after every generation).
* The buffer dies: Ray restarts it empty and the fleet loads its latest snapshot (taken every
  ``buffer.snapshot_interval_s``); the rows added since are lost and counted.
* A node dies (with whatever actors ran there): Ray restarts them on the nodes left, and each
  is handled as above, from the snapshots' copies on the coordinator's node
  (:mod:`distmarl.runtime.snapshots`).

When the data path resynchronises fragments (on-policy), a fault that may leave fragments in
the buffer that the scheduler did not count (a worker that died after its write, a buffer
restored from an older snapshot) makes the member's learner discard its waiting fragments, and
the member owes no update (:meth:`Fleet.resync`). Every counter only moves forward.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayError, RayTaskError

from distmarl.collect.evaluation import Scores
from distmarl.collect.seating import GameResults, LeaguePlan
from distmarl.hpo import MutationPlan
from distmarl.runtime.actors.buffer import make_buffer_actor
from distmarl.runtime.actors.clients import RayStore, RemoteBuffer, Store
from distmarl.runtime.actors.learner import LearnerActor
from distmarl.runtime.actors.member import MemberActor, WorkerView
from distmarl.runtime.actors.rollout import RolloutWorkerActor
from distmarl.runtime.datapath import DataPath
from distmarl.runtime.fleet import Copied, FaultLog, FleetSpec, Mutated, Play, check_state_count
from distmarl.runtime.resources import plan_resources
from distmarl.runtime.run_state import RunState
from distmarl.runtime.scheduler import Call, Scheduler
from distmarl.runtime.snapshots import Snapshots, load_first

log = logging.getLogger(__name__)

#: restart every dead actor, however often; a call in flight is not retried (it is counted)
ACTOR_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 0}
MAX_FAILURES = 50
#: What a lost actor or node raises: the actor itself, or an object it owned (published
#: weights, a state) that died with it (``OwnerDiedError`` is an ``ObjectLostError``).
LOST = (RayActorError, ObjectLostError)
#: seconds between two rounds of asking every rollout worker its pid (see Fleet.tick)
CENSUS_INTERVAL_S = 5.0
#: train calls between snapshots of a learner's full state
STATE_SNAPSHOT_CALLS = 16


def get_with_retry(submit: Callable[[], Any], attempts: int = 120, delay_s: float = 0.5) -> Any:
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


class RayFleet:
    """The buffer actor, one learner per member and ``workers_per_member`` rollout workers per
    member, as ``spec`` says (:class:`~distmarl.runtime.fleet.Fleet`'s verbs), sized to the
    cluster (:func:`~distmarl.runtime.resources.plan_resources`); what faults cost
    (:attr:`faults`). Learners publish every ``weight_sync_updates`` updates; the buffer is
    snapshotted every ``snapshot_interval_s``. Events go to ``state``; a resync of fragments
    clears the member's owed updates in ``scheduler``."""

    def __init__(self, spec: FleetSpec, *, path: DataPath, state: RunState,
                 scheduler: Scheduler) -> None:
        self.path, self.state, self.scheduler = path, state, scheduler
        resources = plan_resources(spec.resources, spec.population, ray.cluster_resources(),
                                   spec.members)
        self.store: Store = RayStore()
        # actor handles are typed Any: their methods are called through ``.remote``
        self.buffer: Any = make_buffer_actor(spec.buffer_kwargs,
                                             num_cpus=resources.buffer["num_cpus"],
                                             **ACTOR_OPTIONS)
        client = RemoteBuffer(self.buffer)
        #: each member's learner; with ``resources.colocate``, a MemberActor also holding
        #: the member's worker 0
        self.learners: list[Any] = [
            MemberActor.options(**resources.member, **ACTOR_OPTIONS).remote(
                spec.learner_kwargs(member, client, self.store),
                spec.worker_kwargs(member, 0, client, self.store)) if resources.colocate
            else LearnerActor.options(**resources.learner, **ACTOR_OPTIONS).remote(
                **spec.learner_kwargs(member, client, self.store))
            for member in range(spec.members)]
        self.workers: list[list[Any]] = [
            [WorkerView(self.learners[member]) if resources.colocate and w == 0
             else RolloutWorkerActor.options(**resources.worker, **ACTOR_OPTIONS).remote(
                 **spec.worker_kwargs(member, w, client, self.store))
             for w in range(spec.population.workers_per_member)]
            for member in range(spec.members)]
        self.faults = FaultLog()
        self.snapshots = Snapshots(spec.snapshot_interval_s)
        self.buffer_incarnation: str | None = None
        self.learner_incarnations: dict[int, str] = {}
        self.worker_pids: dict[tuple[int, int], int] = {}
        #: each learner's torch device (``cuda`` / ``cpu``), as it reported at start
        self.learner_devices: list[str] = []
        self.census: dict[tuple[int, int], Any] = {}
        self.census_taken = time.monotonic()
        self.train_calls: dict[int, int] = {}
        self.inflight: dict[Any, Call] = {}

    # ------------------------------------------------------------------ start
    def hyperparameters(self) -> list[dict[str, Any]]:
        return ray.get([lr.hyperparameters.remote() for lr in self.learners])

    def watch(self) -> None:
        """Publish every learner's weights, snapshot every state, and remember every actor's
        incarnation / pid (a later change is a restart)."""
        published = ray.get([lr.publish.remote() for lr in self.learners])
        for m, (version, box) in zip(self.state.members, published):
            m.set_weights(version, box)
            self.snapshot_learner(m.member)
        self.check_buffer()
        self.check_learners()
        learner_infos = ray.get([lr.info.remote() for lr in self.learners])
        self.learner_devices = [i["device"] for i in learner_infos]
        notes = [i["device_note"] for i in learner_infos if i["device_note"]]
        if notes:  # once per run, where the user sees it (each learner's own goes to its log)
            log.warning("%d of %d learners run on CPU though Ray gave them GPUs: %s",
                        len(notes), len(learner_infos), notes[0])
        infos = [ray.get([w.info.remote() for w in ws]) for ws in self.workers]
        self.worker_pids = {(member, w): info["pid"] for member, ws in enumerate(infos)
                            for w, info in enumerate(ws)}

    def actors(self) -> list[Any]:
        """Every actor of the fleet once (a colocated worker is its learner's actor)."""
        separate = [w for ws in self.workers for w in ws if not isinstance(w, WorkerView)]
        return [self.buffer, *self.learners, *separate]

    def handles(self) -> dict[str, Any]:
        """Actor handles, for tests and fault injection."""
        return {"buffer": self.buffer, "learners": self.learners, "workers": self.workers}

    # ------------------------------------------------------------------ the loop's calls
    def submit(self, call: Call, plan: LeaguePlan | None) -> None:
        if call.kind == "train":
            ref = self.learners[call.member].train.remote(call.updates)
        else:
            box = self.state.members[call.member].weights_box
            ref = self.workers[call.member][call.worker].collect.remote(
                call.steps, call.version, box, plan)
        self.inflight[ref] = call

    def finished(self, timeout_s: float) -> list[tuple[Call, Any]]:
        if not self.inflight:
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        return self._results(ready)

    def drain(self, timeout_s: float) -> list[tuple[Call, Any]]:
        if not self.inflight:
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=len(self.inflight),
                            timeout=timeout_s)
        return self._results(ready)

    def _results(self, refs: Sequence[Any]) -> list[tuple[Call, Any]]:
        """The good results of ``refs``; a failed call goes to the scheduler and
        :meth:`on_failure`, a train call answered by a learner that restarted since (it was
        then restored) is owed again."""
        out = []
        for ref in refs:
            call = self.inflight.pop(ref)
            try:
                result = ray.get(ref)
            except (RayActorError, RayTaskError) as err:
                self.on_failure(call, self.scheduler.on_failure(call), err)
                continue
            if call.kind == "collect":
                self.faults.dropped_nonfinite_rows += result.nonfinite_rows
            elif not self.trained(call.member, result.incarnation):
                self.scheduler.on_failure(call)
                continue
            out.append((call, result))
        return out

    # ------------------------------------------------------------------ between the calls
    def publish(self, members: Sequence[int], snapshot: bool = False) -> None:
        """Restore any of ``members``' learners Ray restarted, then publish their weights;
        ``snapshot``: keep their states too (after a copy or mutation)."""
        self.check_learners(members)
        published = ray.get([self.learners[i].publish.remote() for i in members])
        for i, (version, box) in zip(members, published):
            self.state.members[i].set_weights(version, box)
            if snapshot:
                self.snapshot_learner(i)

    def evaluate(self, members: Sequence[int], episodes: int, max_steps: int | None,
                 seed: int, explore: bool) -> list[Scores]:
        def call(i: int) -> Callable[[], Any]:
            m, worker = self.state.members[i], self.workers[i][0]
            return lambda: worker.evaluate.remote(m.version, m.weights_box, episodes, max_steps,
                                                  seed, explore)
        return self._gather(members, [call(i) for i in members])

    def score_fixed(self, members: Sequence[int], episodes: int, seed: int, explore: bool
                    ) -> tuple[list[Scores], Scores]:
        def call(i: int) -> Callable[[], Any]:
            m, worker = self.state.members[i], self.workers[i][0]
            return lambda: worker.score_fixed.remote(m.version, m.weights_box, episodes, seed,
                                                     explore=explore)
        first = self.workers[0][0]
        *scores, random = self._gather(
            [*members, 0], [*(call(i) for i in members),
                            lambda: first.score_fixed.remote(-1, None, episodes, seed, True)])
        return scores, random

    def play(self, games: Sequence[Play]) -> list[GameResults]:
        return ray.get([self.workers[g.worker][0].play.remote(
            g.version, g.box, g.opponent, g.games, g.seed, g.side, g.explore,
            learner=g.learner) for g in games])

    def _gather(self, members: Sequence[int], calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Results of ``calls`` (``calls[k]`` submits member ``members[k]``'s), made together;
        a call lost with its learner or worker is made again once the learner is restored
        (its weights republished)."""
        refs = [call() for call in calls]
        results = []
        for i, call, ref in zip(members, calls, refs):
            try:
                results.append(ray.get(ref))
            except LOST:
                self.check_learners([i])
                results.append(get_with_retry(call))
        return results

    def carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                  ) -> tuple[list[Copied], list[Mutated]]:
        """:meth:`Fleet.carry_out`. When a learner (or its node) is lost part-way, every
        learner Ray restarted is restored from its snapshot, every member this step changes
        goes back to its last snapshot too (so no copy or mutation is applied twice), and the
        step is carried out once more."""
        try:
            done = self._carry_out(copies, plans)
        except LOST as err:
            log.warning("a learner was lost while copying / mutating (%s); redoing the step "
                        "from the members' snapshots", type(err).__name__)
            self.check_learners()
            changed = sorted({i for i, _ in copies} | {p.member for p in plans if p.kind != "none"})
            for i in changed:
                self.restore_learner(i)
            self.state.event(fault="copy step redone", members=changed)
            done = self._carry_out(copies, plans)
        copied, mutated = done
        self.publish(sorted({c.member for c in copied} | {m.plan.member for m in mutated}),
                     snapshot=True)
        return done

    def _carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                   ) -> tuple[list[Copied], list[Mutated]]:
        learners = self.learners
        sources = sorted({src for _, src in copies})
        states = {src: learners[src].get_state.remote() for src in sources}
        source_sums = {src: learners[src].weights_checksum.remote() for src in sources}
        loads = [learners[i].load_state.remote(states[src]) for i, src in copies]
        copied_sums = [learners[i].weights_checksum.remote() for i, _ in copies]
        mutated = [p for p in plans if p.kind != "none"]
        results = [learners[p.member].mutate.remote(p) for p in mutated]
        copied = [Copied(i, src, hp, before, after) for (i, src), hp, before, after in zip(
            copies, ray.get(loads), ray.get([source_sums[s] for _, s in copies]),
            ray.get(copied_sums))]
        return copied, [Mutated(p, r["change"], r["hp"]) for p, r in zip(mutated, ray.get(results))]

    def set_hyperparameters(self, values: Mapping[int, dict[str, Any]]
                            ) -> dict[int, dict[str, Any]]:
        hps = ray.get([self.learners[i].set_hyperparameters.remote(v) for i, v in values.items()])
        return dict(zip(values, hps))

    # ------------------------------------------------------------------ every turn
    def tick(self, force_snapshot: bool = False) -> None:
        """Called on every turn of the coordinator's loop: copy finished snapshots here, look
        for restarted workers, and ask the buffer for its state when one is due. Only that
        last step waits for an actor (the buffer's incarnation)."""
        self.snapshots.settle()
        self._census()
        if self.snapshots.buffer_due(force_snapshot) and not self.check_buffer():
            self.snapshots.take_buffer(self.buffer.state_dict.remote)

    def trained(self, member: int, incarnation: str) -> bool:
        """A train call of ``member`` came back from learner ``incarnation``: False when the
        learner restarted since (it was then restored); every few calls, snapshot its state."""
        if incarnation != self.learner_incarnations.get(member):
            self.check_learners([member])
            return False
        self.train_calls[member] = self.train_calls.get(member, 0) + 1
        if self.train_calls[member] % STATE_SNAPSHOT_CALLS == 0:
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
            self.faults.lost_updates += lost
            self.check_learners([call.member])

    def check_buffer(self) -> bool:
        """True when the buffer restarted (it was then restored from the latest snapshot)."""
        try:
            incarnation = get_with_retry(self.buffer.incarnation.remote)
        except (RayActorError, GetTimeoutError) as err:
            raise RuntimeError(f"the replay buffer actor is gone and did not come back: {err}"
                               ) from err
        if self.buffer_incarnation is None:
            self.buffer_incarnation = incarnation
            return False
        if incarnation == self.buffer_incarnation:
            return False
        self.faults.buffer_restarts += 1
        load_first(self.buffer.load_state_dict.remote, self.snapshots.buffer_candidates(),
                   "buffer")
        counter = get_with_retry(self.buffer.stats.remote)["counter"]
        lost = max(0, self.state.buffer_rows - counter)
        self.faults.buffer_lost_rows += lost
        self.buffer_incarnation = incarnation
        log.warning("the replay buffer restarted: restored %d rows from its snapshot, %d rows "
                    "lost", counter, lost)
        self.state.event(fault="buffer restarted", restored_rows=counter, lost_rows=lost)
        self.resync(list(range(len(self.learners))))
        return True

    def check_learners(self, members: Sequence[int] | None = None) -> None:
        """Restore every learner Ray restarted since we last looked (it holds fresh weights)."""
        for member in range(len(self.learners)) if members is None else members:
            incarnation = get_with_retry(self.learners[member].incarnation.remote)
            known = self.learner_incarnations.get(member)
            if known is None:
                self.learner_incarnations[member] = incarnation
            elif incarnation != known:
                self.faults.learner_restarts += 1
                restored = self.restore_learner(member)
                self.state.event(fault="learner restarted", member=member, restored=restored)
                log.warning("learner %d restarted and was restored from its last snapshot",
                            member)

    def restore_learner(self, member: int) -> bool:
        """Load the member's last state snapshot into its (restarted) learner and republish.
        The latest snapshot is tried first, then the last copy on the coordinator's node.
        False when neither could be loaded (the learner goes on from a fresh state)."""
        m, learner = self.state.members[member], self.learners[member]
        restored, hp = load_first(learner.load_state.remote,
                                  self.snapshots.learner_candidates(member), f"learner {member}")
        m.hp = hp if restored else get_with_retry(learner.hyperparameters.remote)
        m.set_weights(*get_with_retry(learner.publish.remote))
        self.learner_incarnations[member] = get_with_retry(learner.incarnation.remote)
        return restored

    def snapshot_learner(self, member: int) -> None:
        """Keep the member's latest full state as an object the coordinator owns."""
        self.snapshots.take_learner(member, self.learners[member].get_state.remote())

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

    # ------------------------------------------------------------------ state
    def learner_state(self, member: int) -> dict[str, Any]:
        return get_with_retry(self.learners[member].get_state.remote)

    def learner_states(self) -> list[dict[str, Any]]:
        """Every learner's full state, after restoring any Ray restarted."""
        self.check_learners()
        return [get_with_retry(lr.get_state.remote) for lr in self.learners]

    def buffer_state(self) -> dict[str, Any] | None:
        """The buffer's state for a checkpoint; None where the data path resynchronises
        fragments (on-policy): a resume drops the fragments waiting there anyway, and an image
        run's fragments are gigabytes that would cross the object store and the disk."""
        if self.path.resyncs_fragments:
            return None
        self.check_buffer()
        return get_with_retry(self.buffer.state_dict.remote)

    def load(self, learner_states: Sequence[dict[str, Any]],
             buffer_state: dict[str, Any] | None) -> None:
        """Load a checkpoint's states into the actors."""
        check_state_count(learner_states, len(self.learners))
        ray.get([lr.load_state.remote(s) for lr, s in zip(self.learners, learner_states)])
        if buffer_state is not None:
            ray.get(self.buffer.load_state_dict.remote(buffer_state))

    def close(self) -> None:
        """Nothing to do: the actors end with the driver's Ray (or the job)."""
