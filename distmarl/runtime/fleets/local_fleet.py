"""``LocalFleet``: the whole population in this process; it starts no Ray and no actor.

The same shells as on Ray (:class:`~distmarl.runtime.actors.learner.LearnerShell`,
:class:`~distmarl.runtime.actors.rollout.RolloutShell`,
:class:`~distmarl.runtime.actors.buffer.BufferShell`), held as plain objects: each call runs
when it is submitted (a turn's collect calls in the order the scheduler asked for them, then
the learners learn everything the buffer grants them, in rounds of every learner group in
member order, then the turn's settle calls), and its result waits for
:meth:`LocalFleet.finished`. Nothing runs side by side, so a seeded run is reproducible step for
step; weights and states cross between shells as copies (:class:`LocalStore`), as they would
through Ray's object store. There are no faults to survive: an error ends the run.

Ray is imported all the same: the shells' modules define their actor classes with it, and a
learner asks whether Ray is running (it is not) before it looks for GPUs Ray gave it.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from distmarl.collect.cancel import NEVER, Cancel
from distmarl.collect.evaluation import Scores
from distmarl.hpo import MutationPlan
from distmarl.league.seating import GameResults, LeaguePlan
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.runtime.actors.clients import LocalBuffer, LocalStore, Store
from distmarl.runtime.actors.group import LearnerGroup
from distmarl.runtime.actors.learner import LearnerShell, TrainResult
from distmarl.runtime.actors.readahead import ReadNow
from distmarl.runtime.actors.rollout import RolloutShell
from distmarl.runtime.fleets.protocol import (
    Copied,
    FaultLog,
    FleetSpec,
    Mutated,
    Play,
    check_shard_count,
    check_state_count,
)
from distmarl.runtime.fleets.resources import check_learner_step
from distmarl.runtime.logic.datapath import DataPath
from distmarl.runtime.logic.run_state import RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler
from distmarl.runtime.logic.time_spent import TimeSpent

__all__ = ["LocalFleet"]


class LocalFleet:
    """:class:`~distmarl.runtime.fleets.protocol.Fleet`'s verbs on shells built from ``spec`` in this
    process; published weights go to ``state``'s members. ``path`` says whether fragments
    resynchronise (on-policy: then the buffer's state is not kept in checkpoints, and a resync
    clears the owed updates in ``scheduler``). ``stop``: the run's stop request, which the
    workers' evaluations and games look at between env steps (they then raise
    :class:`~distmarl.collect.cancel.Cancelled`)."""

    def __init__(self, spec: FleetSpec, *, path: DataPath, state: RunState,
                 scheduler: Scheduler, stop: Cancel = NEVER) -> None:
        check_learner_step(spec.resources, gpu_learners=False)  # learners here run on CPU
        self.path, self.state, self.scheduler = path, state, scheduler
        self.store: Store = LocalStore()
        spec = spec.resolved(nodes=1)
        #: each replay shard (one, unless ``buffer.shards`` asks for more)
        self.shards = [BufferShell(spec.shard_kwargs(s), spec.grants(writers_wait=False))
                       for s in range(spec.layout.shards)]
        client = [LocalBuffer(shard) for shard in self.shards]
        self.learners = [LearnerShell(**spec.learner_kwargs(member, client, self.store))
                         for member in range(spec.members)]
        groups = spec.learner_groups(None)
        #: each learner group, and each member's group
        self.groups = [LearnerGroup([self.learners[m] for m in ms], ReadNow()) for ms in groups]
        self.group_of = {m: g for g, ms in enumerate(groups) for m in ms}
        self.workers = [[RolloutShell(**spec.worker_kwargs(member, w, client, self.store, stop))
                         for w in range(spec.population.workers_per_member)]
                        for member in range(spec.members)]
        self.faults = FaultLog()
        self.learner_devices = [lr.device for lr in self.learners]
        self.learner_steps = [str(lr.step.mode) for lr in self.learners]
        self.done: list[tuple[Call, Any]] = []
        #: calls made, by kind (``collect``, ``settle``; learners report without one here)
        self.calls: Counter[str] = Counter()

    def hyperparameters(self) -> list[dict[str, Any]]:
        return [lr.hyperparameters() for lr in self.learners]

    def watch(self) -> None:
        self.publish(range(len(self.learners)))

    # ------------------------------------------------------------------ the loop's calls
    def submit(self, calls: Sequence[tuple[Call, LeaguePlan | None]]) -> None:
        """Run the turn's calls now: the collect calls in order, then every learner's rounds
        until none is granted more (:meth:`learn`), then the settle calls (each learner
        group's as one); the results wait for :meth:`finished`."""
        for call, plan in calls:
            if call.kind == "collect":
                self._collect(call, plan)
        self.calls.update(call.kind for call, _ in calls)
        self.learn()
        settles: dict[int, list[Call]] = {}
        for call, _ in calls:
            if call.kind == "settle":
                settles.setdefault(self.group_of[call.member], []).append(call)
        for g, group_calls in settles.items():
            members = [c.member for c in group_calls]
            results = self.groups[g].settle(members)
            self.done.extend((c, results[c.member]) for c in group_calls)
            self.done.extend((Call("learned", m), r) for m, r in results.items()
                             if m not in members and r.updates)

    def learn(self) -> None:
        """Rounds of every learner group in turn, in member order, until a round of all of
        them learns nothing (the draws then do not depend on who shares a learner); what
        each member learned goes to :meth:`finished` as its report."""
        said: dict[int, TrainResult] = {}
        while True:
            learned = False
            for group in self.groups:
                for m, r in group.pull().items():
                    if r.updates or r.weights:
                        said[m] = r if m not in said else said[m].then(r)
                        learned = learned or r.updates > 0
            if not learned:
                break
        self.done.extend((Call("learned", m), r) for m, r in sorted(said.items()))

    def _collect(self, call: Call, plan: LeaguePlan | None) -> None:
        box = self.state.members[call.member].weights_box
        collected = self.workers[call.member][call.worker].collect(call.steps, call.version,
                                                                    box, plan)
        self.faults.dropped_nonfinite_rows += collected.nonfinite_rows
        self.done.append((call, collected))

    def finished(self, timeout_s: float) -> list[tuple[Call, Any]]:
        done, self.done = self.done, []
        return done

    def drain(self, timeout_s: float) -> list[tuple[Call, Any]]:
        return self.finished(timeout_s)

    def tick(self) -> None:
        """Nothing to look after in one process."""

    # ------------------------------------------------------------------ between the calls
    def publish(self, members: Sequence[int], snapshot: bool = False) -> None:
        """Publish ``members``' weights (no snapshots: nothing here restarts)."""
        for i in members:
            version, box, _ = self.learners[i].publish()
            self.state.members[i].set_weights(version, box)

    def evaluate(self, members: Sequence[int], episodes: int, max_steps: int | None,
                 seed: int, explore: bool) -> list[Scores]:
        out = []
        for i in members:
            m = self.state.members[i]
            out.append(self.workers[i][0].evaluate(m.version, m.weights_box, episodes,
                                                   max_steps, seed, explore))
        return out

    def score_fixed(self, members: Sequence[int], episodes: int, seed: int, explore: bool
                    ) -> tuple[list[Scores], Scores]:
        scores = []
        for i in members:
            m = self.state.members[i]
            scores.append(self.workers[i][0].score_fixed(m.version, m.weights_box, episodes,
                                                         seed, explore=explore))
        return scores, self.workers[0][0].score_fixed(-1, None, episodes, seed, True)

    def play(self, games: Sequence[Play]) -> list[GameResults]:
        return [self.workers[g.worker][0].play(g.version, g.box, g.opponent, g.games, g.seed,
                                               g.side, g.explore, learner=g.learner)
                for g in games]

    def carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                  ) -> tuple[list[Copied], list[Mutated]]:
        sources = sorted({src for _, src in copies})
        # copies, read before any load: a swap must not see a state it just wrote
        states = {src: copy.deepcopy(self.learners[src].get_state()) for src in sources}
        copied = [Copied(i, src, self.learners[i].load_state(copy.deepcopy(states[src])))
                  for i, src in copies]
        mutated = []
        for p in plans:
            if p.kind != "none":
                result = self.learners[p.member].mutate(p)
                mutated.append(Mutated(p, result["change"], result["hp"]))
        return copied, mutated

    def set_hyperparameters(self, values: Mapping[int, dict[str, Any]]
                            ) -> dict[int, dict[str, Any]]:
        return {i: self.learners[i].set_hyperparameters(v) for i, v in values.items()}

    # ------------------------------------------------------------------ state
    def learner_states(self) -> list[dict[str, Any]]:
        """Copies of the learners' states (a checkpoint writes them while training goes on,
        as Ray's object store would hand over copies)."""
        return [copy.deepcopy(learner.get_state()) for learner in self.learners]

    def buffer_state(self) -> list[dict[str, Any]] | None:
        """Each shard's; None where fragments resynchronise (on-policy), as on Ray."""
        if self.path.resyncs_fragments:
            return None
        return [shard.state_dict() for shard in self.shards]

    def load(self, learner_states: Sequence[dict[str, Any]],
             buffer_state: Sequence[dict[str, Any]] | None) -> None:
        check_state_count(learner_states, len(self.learners))
        if buffer_state is not None:
            check_shard_count(buffer_state, len(self.shards))
        for learner, state in zip(self.learners, learner_states):
            learner.load_state(state)
        for shard, shard_state in zip(self.shards, buffer_state or []):
            shard.load_state_dict(shard_state)

    def resync(self, members: Sequence[int]) -> None:
        if not self.path.resyncs_fragments:
            return
        for i in members:
            self.learners[i].discard_pending()
        self.scheduler.forget_owed(members)

    def start_clocks(self) -> None:
        for part in self._clocked():
            part.start_clock()

    def time_spent(self) -> list[TimeSpent]:
        return [t for part in self._clocked() for t in part.time_spent()]

    def _clocked(self) -> list[BufferShell | LearnerGroup | RolloutShell]:
        return [*self.shards, *self.groups, *(w for ws in self.workers for w in ws)]

    def close(self) -> None:
        for workers in self.workers:
            for worker in workers:
                worker.close()
