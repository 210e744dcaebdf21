"""``RayFleet``: the run's actors on a Ray cluster and its calls in flight, side by side.

Each group of ``population.members_per_learner`` members has a host actor holding their
learners (and, with ``resources.colocate``, their first rollout workers); each member has
``workers_per_member`` rollout workers in all; the buffer actor (one per replay shard, spread
over the nodes) serves them all.
Collect calls run side by side and are taken as they finish; the learners pull from the
buffer on their own, and each host's report (one always in flight) says what its members
learned; a member at its boundary is settled. A failed call is accounted for, and the actors
are kept alive, by :class:`~distmarl.runtime.fleets.faults.FaultKeeping`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from distmarl.collect.cancel import NEVER, Cancel
from distmarl.collect.evaluation import Scores
from distmarl.hpo import MutationPlan
from distmarl.league.seating import GameResults, LeaguePlan
from distmarl.runtime.actors.buffer import make_buffer_actor
from distmarl.runtime.actors.cancel import RayTaskCancel
from distmarl.runtime.actors.clients import RayStore, RemoteBuffer, Store
from distmarl.runtime.actors.host import HostActor, LearnerView, WorkerView
from distmarl.runtime.actors.rollout import RolloutWorkerActor
from distmarl.runtime.fleets.faults import LOST, FaultKeeping, gather_with_retry, get_with_retry
from distmarl.runtime.fleets.protocol import (
    Copied,
    FleetSpec,
    Mutated,
    Play,
    check_shard_count,
    check_state_count,
)
from distmarl.runtime.fleets.resources import plan_resources
from distmarl.runtime.fleets.stoppable import wait_unless_stopped
from distmarl.runtime.logic.datapath import DataPath
from distmarl.runtime.logic.run_state import RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler
from distmarl.runtime.logic.time_spent import TimeSpent

log = logging.getLogger(__name__)

#: restart every dead actor, however often; a call in flight is not retried (it is counted)
ACTOR_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 0}


class RayFleet(FaultKeeping):
    """The buffer actor, the host actors of the members' learners and ``workers_per_member``
    rollout workers per member, as ``spec`` says (:class:`~distmarl.runtime.fleets.protocol.Fleet`'s
    verbs), sized to the cluster (:func:`~distmarl.runtime.fleets.resources.plan_resources`); what
    faults cost (:attr:`faults`). Learners publish every ``weight_sync_updates`` updates; the
    buffer is snapshotted every ``snapshot_interval_s``. Events go to ``state``; a resync of
    fragments clears the member's owed updates in ``scheduler``. Evaluations and games in
    flight are cancelled once ``stop`` (the run's stop request) is set
    (:func:`~distmarl.runtime.fleets.stoppable.wait_unless_stopped`)."""

    def __init__(self, spec: FleetSpec, *, path: DataPath, state: RunState,
                 scheduler: Scheduler, stop: Cancel = NEVER) -> None:
        super().__init__(spec.snapshot_interval_s)
        self.stop = stop
        cancel = RayTaskCancel()  # the workers' side of a stop: Ray's flag of a cancelled call
        self.path, self.state, self.scheduler = path, state, scheduler
        cluster = ray.cluster_resources()
        spec = spec.resolved(nodes=sum(1 for n in ray.nodes() if n.get("Alive")))
        groups = spec.learner_groups(cluster)
        resources = plan_resources(spec.resources, spec.population, cluster, spec.members,
                                   learners=len(groups), shards=spec.layout.shards)
        self.store: Store = RayStore()
        # actor handles are typed Any: their methods are called through ``.remote``
        names = [f"distmarl-buffer-{uuid.uuid4().hex}" for _ in range(spec.layout.shards)]
        spread: dict[str, Any] = {"scheduling_strategy": "SPREAD"} if len(names) > 1 else {}
        #: each replay shard's actor
        self.shards: list[Any] = [
            make_buffer_actor(spec.shard_kwargs(s), spec.grants(writers_wait=True), name=name,
                              num_cpus=resources.buffer["num_cpus"], **spread, **ACTOR_OPTIONS)
            for s, name in enumerate(names)]
        client = [RemoteBuffer(shard, name)  # (handed over by name)
                  for shard, name in zip(self.shards, names)]
        #: one host actor per group of members: their learners and, with
        #: ``resources.colocate``, their first rollout workers
        self.hosts: list[Any] = [
            HostActor.options(**resources.host(len(ms)), **ACTOR_OPTIONS).remote(
                [spec.learner_kwargs(m, client, self.store) for m in ms],
                [spec.worker_kwargs(m, 0, client, self.store, cancel) for m in ms]
                if resources.colocate else [])
            for ms in groups]
        host_of = {m: self.hosts[g] for g, ms in enumerate(groups) for m in ms}
        #: each member's host, by index
        self.group_of = {m: g for g, ms in enumerate(groups) for m in ms}
        #: each member's learner (a view of its host)
        self.learners: list[Any] = [LearnerView(host_of[m], m) for m in range(spec.members)]
        self.workers: list[list[Any]] = [
            [WorkerView(host_of[member], member) if resources.colocate and w == 0
             else RolloutWorkerActor.options(**resources.worker, **ACTOR_OPTIONS).remote(
                 **spec.worker_kwargs(member, w, client, self.store, cancel))
             for w in range(spec.population.workers_per_member)]
            for member in range(spec.members)]
        #: each learner's torch device (``cuda`` / ``cpu``), as it reported at start
        self.learner_devices: list[str] = []
        self.learner_steps: list[str] = []
        #: each call in flight: a collect call, a host's settle calls (one ``settle``), or a
        #: host's report (by the host's index)
        self.inflight: dict[Any, Call | list[Call] | int] = {}
        self.draining = False
        #: calls made to the workers and learners, by kind (``collect``, ``settle``,
        #: ``report``): what the coordinator's loop costs the run
        self.calls: Counter[str] = Counter()

    # ------------------------------------------------------------------ start
    def hyperparameters(self) -> list[dict[str, Any]]:
        return ray.get([lr.hyperparameters.remote() for lr in self.learners])

    def watch(self) -> None:
        """Publish every learner's weights, snapshot every state, and remember every actor's
        incarnation / pid (a later change is a restart)."""
        self.publish(range(len(self.learners)), snapshot=True)
        self.check_buffer()
        learner_infos = ray.get([lr.info.remote() for lr in self.learners])
        self.learner_devices = [i["device"] for i in learner_infos]
        self.learner_steps = [i["step"] for i in learner_infos]
        notes = [i["device_note"] for i in learner_infos if i["device_note"]]
        if notes:  # once per run, where the user sees it (each learner's own goes to its log)
            log.warning("%d of %d learners run on CPU though Ray gave them GPUs: %s",
                        len(notes), len(learner_infos), notes[0])
        infos = [ray.get([w.info.remote() for w in ws]) for ws in self.workers]
        self.worker_pids = {(member, w): info["pid"] for member, ws in enumerate(infos)
                            for w, info in enumerate(ws)}
        ray.get([host.start_learning.remote() for host in self.hosts])
        for g in range(len(self.hosts)):
            self._ask_report(g)

    def actors(self) -> list[Any]:
        """Every actor of the fleet once (a colocated worker is its learner's actor)."""
        separate = [w for ws in self.workers for w in ws if not isinstance(w, WorkerView)]
        return [*self.shards, *self.hosts, *separate]

    def handles(self) -> dict[str, Any]:
        """Actor handles (a hosted learner or worker: its view), for tests and fault
        injection."""
        return {"buffer": self.shards[0], "shards": self.shards, "learners": self.learners,
                "workers": self.workers}

    # ------------------------------------------------------------------ the loop's calls
    def submit(self, calls: Sequence[tuple[Call, LeaguePlan | None]]) -> None:
        """Start the collect calls, and the settle calls (each host's together)."""
        settles: dict[int, list[Call]] = {}
        for call, plan in calls:
            if call.kind == "settle":
                settles.setdefault(self.group_of[call.member], []).append(call)
                continue
            box = self.state.members[call.member].weights_box
            ref = self.workers[call.member][call.worker].collect.remote(
                call.steps, call.version, box, plan)
            self.inflight[ref] = call
            self.calls["collect"] += 1
        for g, group_calls in settles.items():
            ref = self.hosts[g].settle.remote([c.member for c in group_calls])
            self.inflight[ref] = group_calls
            self.calls["settle"] += 1

    def _ask_report(self, g: int) -> None:
        """Host ``g``'s next report on its way (it answers once its learners learned)."""
        self.inflight[self.hosts[g].report.remote()] = g
        self.calls["report"] += 1

    def finished(self, timeout_s: float) -> list[tuple[Call, Any]]:
        """The calls that ended and the reports that came: the first (waiting up to
        ``timeout_s``) and every other one by then."""
        if not self.inflight:
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = ray.wait(list(self.inflight), num_returns=len(self.inflight), timeout=0)
        return self._results(ready)

    def drain(self, timeout_s: float) -> list[tuple[Call, Any]]:
        """The learners stopped (what they learned since their last report), then every
        call still in flight once ended (waits up to ``timeout_s``)."""
        self.draining = True
        out: list[tuple[Call, Any]] = []
        for g, ref in enumerate([host.stop_learning.remote() for host in self.hosts]):
            try:
                out.extend(self._reported(g, ray.get(ref, timeout=timeout_s)))
            except (RayActorError, RayTaskError) as err:
                log.warning("learner host %d did not stop cleanly: %s", g, err)
        deadline = time.monotonic() + timeout_s
        while self.inflight:
            ready, _ = ray.wait(list(self.inflight), num_returns=len(self.inflight),
                                timeout=max(0.0, deadline - time.monotonic()))
            out.extend(self._results(ready))
            if time.monotonic() >= deadline:
                break
        return out

    def _results(self, refs: Sequence[Any]) -> list[tuple[Call, Any]]:
        """The good results of ``refs``; a failed call goes to the scheduler and
        :meth:`on_failure`; a learner's result from an incarnation Ray restarted since is
        dropped (the learner was restored)."""
        out = []
        for ref in refs:
            calls = self.inflight.pop(ref)
            if isinstance(calls, int):  # a host's report
                out.extend(self._report(calls, ref))
                continue
            try:
                result = ray.get(ref)
            except (RayActorError, RayTaskError) as err:
                for call in calls if isinstance(calls, list) else [calls]:
                    self.on_failure(call, self.scheduler.on_failure(call), err)
                continue
            if isinstance(calls, list):  # a host's settle calls
                for call in calls:
                    if self.trained(call.member, result[call.member]):
                        out.append((call, result[call.member]))
                    else:  # restored since: settled again
                        self.scheduler.on_failure(call)
                continue
            self.faults.dropped_nonfinite_rows += result.nonfinite_rows
            out.append((calls, result))
        return out

    def _report(self, g: int, ref: Any) -> list[tuple[Call, Any]]:
        """Host ``g``'s report, and the next asked for; a host that died meanwhile has its
        members restored (their learners start again) and is asked again."""
        try:
            said = ray.get(ref)
        except (RayActorError, RayTaskError) as err:
            members = [m for m, h in self.group_of.items() if h == g]
            self.host_failed(members, err)
            said = {}
        out = self._reported(g, said)
        if not self.draining:
            self._ask_report(g)
        return out

    def _reported(self, g: int, said: Mapping[int, Any]) -> list[tuple[Call, Any]]:
        """What host ``g``'s members said they learned, as ``learned`` results."""
        return [(Call("learned", m), r) for m, r in sorted(said.items())
                if self.trained(m, r)]

    # ------------------------------------------------------------------ between the calls
    def publish(self, members: Sequence[int], snapshot: bool = False) -> None:
        """Publish ``members``' weights, one call each, together; a reply from a learner Ray
        restarted (its incarnation says so) is dropped, the learner restored from its snapshot
        (which publishes again). ``snapshot``: keep their states too (after a change)."""
        published = gather_with_retry([self.learners[i].publish.remote for i in members])
        for i, p in zip(members, published):
            if not self.note_incarnation(i, p.incarnation):
                self.state.members[i].set_weights(p.version, p.box)
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
        refs = [self.workers[g.worker][0].play.remote(
            g.version, g.box, g.opponent, g.games, g.seed, g.side, g.explore,
            learner=g.learner) for g in games]
        wait_unless_stopped(refs, self.stop)
        return ray.get(refs)

    def _gather(self, members: Sequence[int], calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Results of ``calls`` (``calls[k]`` submits member ``members[k]``'s), made together;
        a call lost with its learner or worker is made again once the learner is restored
        (its weights republished)."""
        refs = [call() for call in calls]
        wait_unless_stopped(refs, self.stop)
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
        """:meth:`Fleet.carry_out`. When a learner (or its node) is lost part-way, or one the
        step involves had restarted unseen (an idle learner: its incarnation, asked before the
        step's calls, says so), every learner Ray restarted is restored from its snapshot,
        every member this step changes goes back to its last snapshot too (so no copy or
        mutation is applied twice, none from a fresh state), and the step is carried out once
        more."""
        try:
            done, restarted = self._carry_out(copies, plans)
            if not restarted:
                return done
            why = f"learners {restarted} had restarted"
        except LOST as err:
            why = f"a learner was lost ({type(err).__name__})"
        log.warning("copying / mutating: %s; redoing the step from the members' snapshots", why)
        self.check_learners()
        changed = sorted({i for i, _ in copies} | {p.member for p in plans if p.kind != "none"})
        for i in changed:
            self.restore_learner(i)
        self.state.event(fault="copy step redone", members=changed)
        return self._carry_out(copies, plans)[0]

    def _carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                   ) -> tuple[tuple[list[Copied], list[Mutated]], list[int]]:
        """The step's calls, made together: each involved learner's incarnation, each
        source's state read once, every load, then every mutation (a learner answers its calls
        in order); and the involved members whose learner had restarted (now restored)."""
        learners = self.learners
        mutated = [p for p in plans if p.kind != "none"]
        involved = sorted({m for pair in copies for m in pair} | {p.member for p in mutated})
        incarnations = [learners[i].incarnation.remote() for i in involved]
        states = {src: learners[src].get_state.remote() for src in sorted({s for _, s in copies})}
        loads = [learners[i].load_state.remote(states[src]) for i, src in copies]
        results = [learners[p.member].mutate.remote(p) for p in mutated]
        copied = [Copied(i, src, hp) for (i, src), hp in zip(copies, ray.get(loads))]
        done = copied, [Mutated(p, r["change"], r["hp"]) for p, r in zip(mutated, ray.get(results))]
        restarted = [i for i, incarnation in zip(involved, ray.get(incarnations))
                     if self.note_incarnation(i, incarnation)]
        return done, restarted

    def set_hyperparameters(self, values: Mapping[int, dict[str, Any]]
                            ) -> dict[int, dict[str, Any]]:
        hps = ray.get([self.learners[i].set_hyperparameters.remote(v) for i, v in values.items()])
        return dict(zip(values, hps))

    # ------------------------------------------------------------------ state
    def learner_states(self) -> list[dict[str, Any]]:
        """Every learner's full state (the calls made together), after restoring any Ray
        restarted."""
        self.check_learners()
        return gather_with_retry([lr.get_state.remote for lr in self.learners])

    def buffer_state(self) -> list[dict[str, Any]] | None:
        """Each shard's state for a checkpoint (asked together); None where the data path
        resynchronises fragments (on-policy): a resume drops the fragments waiting there
        anyway, and an image run's fragments are gigabytes that would cross the object store
        and the disk."""
        if self.path.resyncs_fragments:
            return None
        self.check_buffer()
        return gather_with_retry([shard.state_dict.remote for shard in self.shards])

    def load(self, learner_states: Sequence[dict[str, Any]],
             buffer_state: Sequence[dict[str, Any]] | None) -> None:
        """Load a checkpoint's states into the actors."""
        check_state_count(learner_states, len(self.learners))
        if buffer_state is not None:
            check_shard_count(buffer_state, len(self.shards))
        ray.get([lr.load_state.remote(s) for lr, s in zip(self.learners, learner_states)])
        ray.get([shard.load_state_dict.remote(state)
                 for shard, state in zip(self.shards, buffer_state or [])])

    def restore_learner(self, member: int) -> bool:
        """:meth:`FaultKeeping.restore_learner`, then the member's host learns again (a host
        Ray restarted starts without its rounds)."""
        restored = super().restore_learner(member)
        get_with_retry(self.hosts[self.group_of[member]].start_learning.remote)
        return restored

    def start_clocks(self) -> None:
        ray.get([actor.start_clock.remote() for actor in self.actors()])

    def time_spent(self) -> list[TimeSpent]:
        """Every actor's ledger, asked together (a host answers for its learners and
        colocated workers); an actor that does not answer is left out."""
        out: list[TimeSpent] = []
        for ref in [actor.time_spent.remote() for actor in self.actors()]:
            try:
                out.extend(ray.get(ref, timeout=30))
            except RayError as err:
                log.warning("an actor's time was not counted: %s", err)
        return out

    def close(self) -> None:
        """Nothing to do: the actors end with the driver's Ray (or the job)."""
