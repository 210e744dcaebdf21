"""``CoordinatorActor``: drives a population run on Ray.

It owns no env and no network: it schedules ``collect`` calls on rollout workers and ``train``
calls on learners (one call in flight per actor, so no queue can grow), keeps each member's
update-to-data ratio, and between generations runs evaluation, selection and mutation
(``runtime/evolution.py``). Metrics reach MLflow from here only, in batches. Plain data in,
plain data out.

The update-to-data ratio depends on the algorithm's family. Off-policy members: one update per
``learn_step`` new transitions (AgileRL's count), workers collecting ``chunk_steps`` per call
once the buffer holds ``learning_starts`` rows. On-policy members: one update per rollout
fragment (``learn_step`` steps of a worker's sub-envs, one collect call), from the first
fragment on (``learning_starts`` and ``learning_delay`` do not apply), with a bounded number of
fragments collected and not yet learned (:meth:`Coordinator._may_collect`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError, RayTaskError

from distmarl.config import ExperimentConfig
from distmarl.factory import (
    buffer_kwargs,
    env_spaces,
    is_on_policy,
    reads_state,
)
from distmarl.hpo import HyperparameterConfig, Lineage, Mutations, RLParameter, TournamentSelection
from distmarl.hpo.pbt import AsyncExploit
from distmarl.runtime import evolution, faults, persistence
from distmarl.runtime.buffer_actor import make_buffer_actor
from distmarl.runtime.learner_actor import LearnerActor
from distmarl.runtime.members import DONE, RUN, WAIT, MemberState
from distmarl.runtime.resources import plan_resources
from distmarl.runtime.rollout_actor import RolloutWorkerActor

log = logging.getLogger(__name__)

MAX_UPDATES_PER_CALL = 32
MAX_OWED_CALLS = 2  # a member's workers pause while its learner owes this many full calls
STATE_SNAPSHOT_CALLS = 16  # train calls between snapshots of a learner's full state


class Coordinator:
    """Plain class behind :data:`CoordinatorActor` (``run`` blocks; ``progress`` and ``stop``
    answer meanwhile, the actor has two threads)."""

    def __init__(self, config: dict[str, Any], run_dir: str, resume: str | None = None,
                 ray_address: str | None = None) -> None:
        self.cfg = ExperimentConfig.model_validate(config)
        self.run_dir = Path(run_dir)
        self.resume_path = resume
        self.ray_address = ray_address
        self._stop_requested = False
        self.started = time.time()
        self.generation = 0
        self.total_env_steps = 0
        self.buffer_rows = 0
        self.events: list[dict[str, Any]] = []
        self.copy_log: list[dict[str, Any]] = []
        self.fitness_history: list[list[float]] = []
        self.stop_reason = "running"
        self.members: list[MemberState] = []
        self.faults = faults.FaultLog()
        self.worker_pids: dict[tuple[int, int], int] = {}
        self.snapshots = faults.Snapshots(self.cfg.buffer.snapshot_interval_s)
        self.rng = np.random.default_rng(self.cfg.seed)
        self._inflight: dict[Any, tuple[str, int, int]] = {}
        self._learner_busy: set[int] = set()
        self._worker_busy: set[tuple[int, int]] = set()
        # (member's updates, weights version it acts with) when a collect call began
        self._collect_start: dict[tuple[int, int], tuple[int, int]] = {}
        self._last_write = 0

    # ------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        cfg = self.cfg
        self.spaces = env_spaces(cfg.env)
        self.agents = list(self.spaces[0])
        self.resources = plan_resources(cfg, ray.cluster_resources())
        self.on_policy = is_on_policy(cfg.algorithm.name)
        self.hp_config = HyperparameterConfig(**{
            name: RLParameter(p.min, p.max, p.grow_factor, p.shrink_factor,
                              int if p.dtype == "int" else float)
            for name, p in cfg.evolution.hp_config.items()})
        self.hp_config.check_against(cfg.algorithm.name)
        evo = cfg.evolution
        self.selection = TournamentSelection(evo.tournament.size, evo.tournament.elitism,
                                             cfg.population.size, evo.eval_loop)
        m = evo.mutation
        self.mutations = Mutations(m.no_mutation, m.architecture, m.new_layer_prob, m.parameters,
                                   m.activation, m.rl_hp, m.mutation_sd, m.activation_selection,
                                   m.mutate_elite)
        self.exploit = AsyncExploit(evo.bottom_frac, evo.top_frac)
        fields = buffer_kwargs(cfg, self.agents, reads_state(cfg.algorithm, self.spaces))
        self.buffer = make_buffer_actor(fields,
                                        num_cpus=self.resources.buffer["num_cpus"],
                                        **faults.ACTOR_OPTIONS)
        self.learners = [
            LearnerActor.options(**self.resources.learner, **faults.ACTOR_OPTIONS).remote(
                slot, cfg.algorithm, self.spaces, self.buffer, seed=cfg.seed * 1009 + slot,
                weight_sync_updates=cfg.training.weight_sync_updates,
                num_envs=cfg.env.num_envs)
            for slot in range(cfg.population.size)]
        self.workers = [
            [RolloutWorkerActor.options(**self.resources.worker, **faults.ACTOR_OPTIONS).remote(
                slot, w, cfg.env, cfg.algorithm, self.spaces, self.buffer,
                seed=cfg.seed * 7919 + slot * 101 + w)
             for w in range(cfg.population.workers_per_member)]
            for slot in range(cfg.population.size)]
        hps = ray.get([lr.hyperparameters.remote() for lr in self.learners])
        first = min(evo.evo_steps, cfg.training.max_steps)
        self.members = [MemberState(slot, first, hp) for slot, hp in enumerate(hps)]
        self.lineage = Lineage(hps)
        self.tracker = persistence.make_tracker(self)
        if self.resume_path:
            persistence.restore(self, self.resume_path)
        elif evo.mutation.pretrain_mutation:
            evolution.pretrain_mutation(self)
        for m, (version, box) in zip(self.members, ray.get([lr.publish.remote() for lr in self.learners])):
            m.version, m.weights_box = version, box
            faults.snapshot_learner(self, m.slot)
        faults.check_buffer(self)  # remembers the buffer's incarnation
        faults.check_learners(self)  # and the learners' incarnations
        self.worker_pids = {(slot, w): info["pid"] for slot, ws in enumerate(self.workers)
                            for w, info in enumerate(ray.get([x.info.remote() for x in ws]))}
        persistence.start_tracking(self)

    # ------------------------------------------------------------------ main loop
    def run(self) -> dict[str, Any]:
        """Train until ``max_steps`` per member, the target fitness, or :meth:`stop`."""
        setup_start = time.perf_counter()
        self._setup()
        self._t0, self._steps0 = time.perf_counter(), self.total_env_steps
        self.setup_seconds = self._t0 - setup_start  # actors started, weights published
        try:
            while self.stop_reason == "running":
                if self._stop_requested:
                    self.stop_reason = "stopped"
                    break
                self._schedule()
                if self._inflight:
                    ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=0.5)
                    for ref in ready:
                        self._handle(ref)
                self._advance_phases()
                persistence.maybe_write(self)
                self.snapshots.maybe_snapshot_buffer(self)
            self._drain()
            persistence.finish(self)
        except BaseException:
            persistence.finish(self, failed=True)
            raise
        return self.summary()

    def _schedule(self) -> None:
        for m in self.members:
            if m.phase != RUN:
                continue
            if (m.slot not in self._learner_busy and m.owed >= 1 and self._may_learn()
                    and self._lag_allows_publish(m)):
                k = min(int(m.owed), MAX_UPDATES_PER_CALL)
                m.owed -= k
                m.requested = k
                self._submit(self.learners[m.slot].train.remote(k), "train", m.slot)
            steps = self.collect_steps(m)
            for w, worker in enumerate(self.workers[m.slot]):
                if (m.slot, w) in self._worker_busy or m.scheduled_steps >= m.boundary:
                    continue
                if not self._may_collect(m):
                    break  # the learner is behind: keep the update-to-data ratio exact
                m.scheduled_steps += steps * self.cfg.env.num_envs
                ref = worker.collect.remote(steps, m.version, m.weights_box)
                self._submit(ref, "collect", m.slot, w)

    def collect_steps(self, m: MemberState) -> int:
        """Vectorised steps of one collect call: a whole fragment (``learn_step``) for an
        on-policy member, ``training.chunk_steps`` otherwise."""
        return int(m.hp["learn_step"]) if self.on_policy else self.cfg.training.chunk_steps

    def _may_learn(self) -> bool:
        return self.on_policy or self.buffer_rows >= self.cfg.buffer.learning_starts

    def _lag_allows_publish(self, m: MemberState) -> bool:
        """Off-policy: whether ``m``'s learner may start a train call, which can publish one
        new weight version, without any collect call in flight falling more than
        ``training.max_policy_lag`` versions behind (the learner waits for slow workers).
        On-policy members keep their own bound (:meth:`_may_collect`)."""
        if self.on_policy:
            return True
        started = [self._collect_start[(m.slot, w)][1] for w in range(len(self.workers[m.slot]))
                   if (m.slot, w) in self._worker_busy]
        return not started or m.version + 1 - min(started) <= self.cfg.training.max_policy_lag

    def _may_collect(self, m: MemberState) -> bool:
        """Whether another collect call may start for ``m``.

        Off-policy: while its learner owes fewer than ``MAX_OWED_CALLS`` full train calls, and
        (with ``training.max_policy_lag`` 0) no train call of it is in flight, since that call
        may publish a version the new chunk would lag behind.

        On-policy: while every fragment's policy lag stays within ``W = workers_per_member``
        updates. A fragment starts with the weights of the member's ``m.updates`` updates so
        far (the learner publishes after every call) and is learned after the fragments that
        reach the buffer before it; counting every fragment that might (those owed, being
        learned, or being collected) bounds its lag: at most ``W`` for a fragment starting now
        (``owed + requested + collecting <= W``) and, for each fragment in flight, the updates
        since it began plus those. One worker: the next fragment is collected while the last
        is learned, so each is learned one update after the policy that collected it.
        """
        if not self.on_policy:
            lag_ok = self.cfg.training.max_policy_lag >= 1 or m.slot not in self._learner_busy
            return lag_ok and m.owed < MAX_OWED_CALLS * MAX_UPDATES_PER_CALL
        busy = [w for w in range(len(self.workers[m.slot])) if (m.slot, w) in self._worker_busy]
        oldest = min((self._collect_start[(m.slot, w)][0] for w in busy), default=m.updates)
        ahead = m.owed + m.requested + len(busy)
        return ahead + (m.updates - oldest) <= len(self.workers[m.slot])

    def _submit(self, ref: Any, kind: str, slot: int, worker: int = -1) -> None:
        self._inflight[ref] = (kind, slot, worker)
        if kind == "train":
            self._learner_busy.add(slot)
        elif kind == "collect":
            self._worker_busy.add((slot, worker))
            m = self.members[slot]
            self._collect_start[(slot, worker)] = (m.updates, m.version)

    def _handle(self, ref: Any) -> None:
        kind, slot, worker = self._inflight.pop(ref)
        m = self.members[slot]
        try:
            result = ray.get(ref)
        except (RayActorError, RayTaskError) as err:
            if kind == "collect":
                self._worker_busy.discard((slot, worker))
            else:
                self._learner_busy.discard(slot)
            faults.on_failure(self, kind, slot, worker, err)
            return
        if kind == "collect":
            self._worker_busy.discard((slot, worker))
            m.scheduled_steps += result.env_steps - self.collect_steps(m) * self.cfg.env.num_envs
            m.env_steps += result.env_steps
            self.total_env_steps += result.env_steps
            self.buffer_rows += result.env_steps
            m.scores.extend(result.episode_scores)
            m.episodes += len(result.episode_scores)
            m.collect_seconds += result.seconds
            m.refused_chunks += result.refused
            m.max_lag_seen = max(m.max_lag_seen, m.version - result.version)
            self.faults.dropped_nonfinite_rows += result.nonfinite_rows
            if self.on_policy:
                m.owed += 1  # one whole fragment, one update
            elif self.buffer_rows >= self.cfg.buffer.learning_starts:
                m.accrue(result.env_steps, self.cfg.training.learning_delay)
        elif kind == "train":
            self._learner_busy.discard(slot)
            if result.incarnation != m.learner_incarnation:  # restarted between our calls
                m.owed += m.requested
                m.requested = 0
                faults.check_learners(self, [slot])
                return
            m.updates += result.updates
            if not self.on_policy:  # a refused sample is owed again; a missing fragment is
                m.owed += m.requested - result.updates  # gone (a fault), never owed again
            m.requested = 0
            m.train_seconds += result.seconds
            if result.metrics:
                m.metrics = result.metrics
            if result.weights is not None:
                m.version, m.weights_box = result.weights
            m.train_calls += 1
            if m.train_calls % STATE_SNAPSHOT_CALLS == 0:
                faults.snapshot_learner(self, slot)

    def _member_idle(self, slot: int) -> bool:
        return slot not in self._learner_busy and not any(
            (slot, w) in self._worker_busy for w in range(len(self.workers[slot])))

    def _advance_phases(self) -> None:
        for m in self.members:
            if (m.phase == RUN and m.env_steps >= m.boundary and m.owed < 1
                    and self._member_idle(m.slot)):
                m.phase = WAIT
                if self.cfg.evolution.mode == "async":
                    evolution.evolve_async(self, m.slot)
        if self.cfg.evolution.mode == "sync" and all(m.phase == WAIT for m in self.members):
            evolution.evolve_sync(self)
        if all(m.phase == DONE for m in self.members) and self.stop_reason == "running":
            self.stop_reason = "max_steps"

    def _drain(self) -> None:
        """Wait for calls in flight (their rows and updates count) before the final save."""
        if self._inflight:
            ready, _ = ray.wait(list(self._inflight), num_returns=len(self._inflight), timeout=60)
            for ref in ready:
                self._handle(ref)

    # ------------------------------------------------------------------ queries
    def stop(self) -> bool:
        self._stop_requested = True
        return True

    def env_steps_per_s(self) -> float:
        elapsed = time.perf_counter() - getattr(self, "_t0", time.perf_counter())
        return (self.total_env_steps - getattr(self, "_steps0", 0)) / elapsed if elapsed > 0 else 0.0

    def best_fitness(self) -> float | None:
        latest = [m.fitness[-1] for m in self.members if m.fitness]
        return max(latest) if latest else None

    def progress(self) -> dict[str, Any]:
        return {"env_steps": self.total_env_steps, "generation": self.generation,
                "best_fitness": self.best_fitness(), "env_steps_per_s": self.env_steps_per_s(),
                "max_env_steps": self.cfg.training.max_steps * self.cfg.population.size,
                "updates": sum(m.updates for m in self.members), "stop_reason": self.stop_reason}

    def summary(self) -> dict[str, Any]:
        wall = time.time() - self.started
        return {
            "stop_reason": self.stop_reason,
            "env_steps": self.total_env_steps,
            "wall_seconds": wall,
            "setup_seconds": getattr(self, "setup_seconds", None),
            "env_steps_per_s": self.env_steps_per_s(),
            "updates": sum(m.updates for m in self.members),
            "generations": self.generation,
            "best_fitness": self.best_fitness(),
            "members": [{"slot": m.slot, "fitness": m.fitness, "hp": m.hp,
                         "env_steps": m.env_steps, "updates": m.updates,
                         "max_policy_lag_seen": m.max_lag_seen,
                         "mean_score": m.mean_score(), "episodes": m.episodes}
                        for m in self.members],
            "copies": self.copy_log,
            "events": self.events,
            "faults": self.faults.to_json(),
            "run_dir": str(self.run_dir),
            "mlflow": self.tracker.run_ids() if getattr(self, "tracker", None) else {},
            "tracking": self.tracker.status() if getattr(self, "tracker", None) else {},
            "checkpoint": getattr(self, "last_checkpoint", None),
            "elite_model_uri": getattr(self, "elite_model_uri", None),
            "resumed_from": getattr(self, "resumed_from", None),
        }

    def handles(self) -> dict[str, Any]:
        """Actor handles, for tests and fault injection."""
        return {"buffer": self.buffer, "learners": self.learners, "workers": self.workers}


CoordinatorActor = ray.remote(max_concurrency=4)(Coordinator)
