"""``TrainingRun``: drives a population run by composing the runtime's parts; ``CoordinatorActor``
runs it on Ray.

- :class:`~distmarl.runtime.logic.run_state.RunState`: the run's counters, one record per member;
- :mod:`~distmarl.runtime.logic.datapath`: the off-policy or on-policy rules, chosen once;
- :class:`~distmarl.runtime.logic.scheduler.Scheduler` (pure): which calls to make next;
- a :class:`~distmarl.runtime.fleets.protocol.Fleet`: the learners, workers and buffer, as Ray actors
  (:class:`~distmarl.runtime.fleets.ray_fleet.RayFleet`, with restarts and snapshots) or in this
  process (:class:`~distmarl.runtime.fleets.local_fleet.LocalFleet`);
- :class:`~distmarl.runtime.coordinator.generations.Generations`: evaluate, select, mutate, copy;
- :class:`~distmarl.runtime.records.recorder.Recorder`: metrics, checkpoints, artifacts, resume.

The loop: ask the scheduler for calls, submit them to the fleet, hand each finished result
back, evolve members at their boundaries, record. The loop steps no env and trains no network:
the fleet's rollout workers and learners do (on Ray in actors of their own; the in-process
fleet's in this process). The coordinator itself builds one probe env at the start (the spaces,
:func:`~distmarl.factory.env_spaces`) and, for the records, an env per video it renders and
acting policies from members' published weights (actors only: the videos and the elite model,
:mod:`~distmarl.runtime.records`). Learner states reach it only as data: checkpoints on their
way to and from disk, and on Ray the fleet's restart snapshots.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import ray

from distmarl.checkpoint import agent_spaces
from distmarl.collect.cancel import Cancel, Cancelled
from distmarl.config import ExperimentConfig
from distmarl.config.replay import EVERY_STEP, UpdateRule
from distmarl.factory import buffer_kwargs, converted, env_spaces, make_algorithm, rollout_spec
from distmarl.hpo.strategies import make_strategy
from distmarl.league.seating import SeatingRules
from distmarl.league.setup import LeagueSetup, league_setup
from distmarl.runtime.actors.group import ROUND_UPDATES
from distmarl.runtime.coordinator.generations import Generations, make_hp_config
from distmarl.runtime.fleets.local_fleet import LocalFleet
from distmarl.runtime.fleets.process_group import own_process_group
from distmarl.runtime.fleets.protocol import Fleet, FleetSpec
from distmarl.runtime.fleets.ray_fleet import RayFleet
from distmarl.runtime.hooks.league import make_hooks
from distmarl.runtime.logic.datapath import DataPath, make_datapath
from distmarl.runtime.logic.run_state import DONE, MemberState, RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler
from distmarl.runtime.logic.stop_request import StopRequest, interruption, stop_details
from distmarl.runtime.logic.time_spent import CALL, Ledger, time_shares
from distmarl.runtime.records.recorder import Recorder
from distmarl.version import __version__


def progress(state: RunState, max_env_steps: int) -> dict[str, Any]:
    """What the progress bar shows: counters of ``state`` and the run's total env steps."""
    return {"env_steps": state.total_env_steps, "generation": state.generation,
            "best_fitness": state.best_fitness(), "env_steps_per_s": state.env_steps_per_s(),
            "max_env_steps": max_env_steps, "updates": state.updates(),
            "stop_reason": state.stop_reason}


class _Stopwatch:
    """``mark(name)`` puts the seconds since the previous mark under ``name``."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = now - self.last
        self.last = now


def copy_labels(cfg: ExperimentConfig, setup: LeagueSetup | None) -> list[str] | None:
    """Who may copy whom: a league's members within their side, a mixed population's within
    their algorithm (unless it converts members); None: any member any other."""
    if setup is not None:
        return list(setup.league.side_of_member)
    algos = [a.name for a in cfg.member_algorithm_configs()]
    if len(set(algos)) > 1 and cfg.population.cross_algorithm != "convert":
        return algos
    return None


def max_owed(max_policy_lag: int, weight_sync_updates: int) -> int:
    """Updates a learner may owe before its member's writers wait: ``max_policy_lag``
    versions' worth, and a round's more (so that a learner that finished a round finds the
    next one's data stored, not a writer waiting to store it)."""
    return max_policy_lag * weight_sync_updates + ROUND_UPDATES


def fleet_spec(cfg: ExperimentConfig, spaces: tuple[Any, ...], league: SeatingRules | None
               ) -> FleetSpec:
    """What ``cfg``'s fleet is built from (the env's ``spaces``, a league's seating rules)."""
    algos = cfg.member_algorithm_configs()
    rollout = rollout_spec(cfg, spaces)
    replay = cfg.replay
    return FleetSpec(
        members=cfg.num_members, population=cfg.population, env=cfg.env, algorithms=algos,
        spaces=spaces, buffer_kwargs=buffer_kwargs(cfg, list(spaces[0]), rollout),
        rollout=rollout, weight_sync_updates=cfg.training.weight_sync_updates,
        seed=cfg.seed, resources=cfg.resources,
        snapshot_interval_s=cfg.buffer.snapshot_interval_s, league=league,
        convert=cfg.population.cross_algorithm == "convert",
        update_rule=EVERY_STEP if replay is None
        else UpdateRule(replay.learning_starts, replay.learning_delay),
        max_owed=None if replay is None else max_owed(replay.max_policy_lag,
                                                      cfg.training.weight_sync_updates),
        shards=cfg.buffer.shards)


def make_fleet(spec: FleetSpec, local: bool, path: DataPath, state: RunState,
               scheduler: Scheduler, stop: Cancel) -> Fleet:
    """A :class:`LocalFleet` (``local``) or a :class:`RayFleet` (Ray must be running); its
    evaluations and games stop part-way once ``stop`` is set. The
    in-process fleet's env worker processes start in a process group of their own, as a local
    Ray's do: a signal to the driver's group (``timeout``, Ctrl-C) reaches the driver alone,
    which stops the run with its envs still there."""
    if not local:
        return RayFleet(spec, path=path, state=state, scheduler=scheduler, stop=stop)
    with own_process_group():
        return LocalFleet(spec, path=path, state=state, scheduler=scheduler, stop=stop)


class TrainingRun:
    """One training run: ``__init__`` builds the parts, each from its own sections of ``cfg``
    (the fleet started, in this process where ``local``, else on Ray; a checkpoint loaded when
    ``resume`` names one, weights published, tracking started); :meth:`run` trains until
    ``max_steps`` per member, the target fitness, or ``stop`` is set (a
    :class:`~distmarl.runtime.logic.stop_request.StopRequest` says why and whether a signal cut the run
    short)."""

    def __init__(self, cfg: ExperimentConfig, run_dir: Path, resume: str | None,
                 ray_address: str | None, stop: threading.Event, local: bool = False) -> None:
        started = time.perf_counter()
        #: seconds of each start-up phase, in order (where start-up time goes)
        self.setup_phases: dict[str, float] = {}
        mark = _Stopwatch(self.setup_phases)
        self.stop_requested = stop
        self.max_env_steps = cfg.training.max_steps_per_member * cfg.num_members
        evo, training = cfg.evolution, cfg.training
        #: each member's algorithm (a mixed population's differ; one family)
        algos = cfg.member_algorithm_configs()
        algo = algos[0]
        # a bad range fails before any actor starts
        hp_config = make_hp_config(evo.hp_config, sorted({a.name for a in algos}))
        spaces = env_spaces(cfg.env)
        mark("env_spaces")
        self.state = RunState()
        path = make_datapath(algo.name, training)
        self.scheduler = Scheduler(path, self.state, cfg.population.workers_per_member,
                                   cfg.env.num_envs)
        setup = league_setup(cfg, spaces)
        seating = None if setup is None else SeatingRules(setup.sides, cfg.league.win_above,
                                                          cfg.league.opponent_epsilon)
        self.fleet = make_fleet(fleet_spec(cfg, spaces, seating), local, path, self.state,
                                self.scheduler, interruption(stop))
        self.game = make_hooks(cfg, setup, self.state, self.fleet)
        evo_steps = cfg.member_evo_steps()
        self.state.members = [MemberState(i, min(evo_steps[i], training.max_steps_per_member), hp,
                                          algorithm=algos[i].name)
                              for i, hp in enumerate(self.fleet.hyperparameters())]
        mark("learners")  # their processes started, torch imported, networks built
        strategy = make_strategy(evo, cfg.num_members, hp_config, copy_labels(cfg, setup))
        self.generations = Generations(evo, training, cfg.seed, self.fleet, self.state,
                                       hp_config, strategy, self.game, evo_steps=evo_steps)
        tags = {"distmarl.version": __version__, "env": cfg.env.spec,
                "algorithm": "+".join(dict.fromkeys(a.name for a in algos)),
                "ray.address": "none (in process)" if local else str(ray_address or "local"),
                "population": str(cfg.num_members)}
        self.recorder = Recorder(
            cfg.tracking, run_dir, name=cfg.name, config=json.loads(cfg.model_dump_json()),
            tags=tags, max_steps=training.max_steps_per_member, evo_steps=evo_steps,
            new_policy=lambda name: make_algorithm(converted(algo, name), spaces, seed=cfg.seed,
                                                   learner=False),
            state=self.state, fleet=self.fleet, generations=self.generations,
            agent_spaces=agent_spaces(spaces[0], spaces[1]))
        if resume:
            self.recorder.restore(resume)
        else:
            if evo.initial_hp == "sampled":
                self.generations.sample_initial_hp()
            if evo.mutation.pretrain_mutation:
                self.generations.pretrain_mutation()
        self.final_episodes, self.final_seed = evo.final_episodes, evo.final_seed
        mark("recorder")
        self.fleet.watch()
        mark("workers")  # weights published, states snapshot, every worker up
        self.recorder.start()
        mark("tracking")
        self.interrupted = False  # a signal stopped the run
        self.setup_seconds = time.perf_counter() - started
        #: the coordinator's own work: planning, generations (their evaluations), records
        self.ledger = Ledger("coordinator")
        #: each kind of actor's shares of time (:mod:`~distmarl.runtime.logic.time_spent`),
        #: once the run ended
        self.time: dict[str, dict[str, float]] = {}
        self.fleet.start_clocks()
        self.state.start_clock()

    def run(self) -> dict[str, Any]:
        """The loop; returns the summary. A failure still closes the tracking runs. An
        interrupting stop (a signal) cuts an evaluation or the final evaluation short (they
        look at it between env steps: :mod:`distmarl.collect.cancel`); what they played is
        no result, and the run ends as stopped, its checkpoint written."""
        try:
            while self.state.running:
                if self.stop_requested.is_set():
                    reason, self.interrupted = stop_details(self.stop_requested)
                    self.state.stop(reason)
                    break
                self._turn()
            for call, result in self.fleet.drain(timeout_s=60):  # their rows and updates count
                self._handle(call, result)
            with self.ledger.spend(CALL):
                if self.final_episodes > 0 and not self.interrupted:
                    self._final_evaluation()
            self._count_time()
            self.recorder.finish("KILLED" if self.interrupted else "FINISHED")
        except BaseException:
            self.recorder.finish("FAILED")
            raise
        finally:
            self.fleet.close()
        return self.summary()

    def _turn(self) -> None:
        """One turn of the loop: submit the calls that may start, take those that ended,
        evolve the members at their boundaries, record. Its own work counts as the
        coordinator's; the fleet's calls are the actors' (in one process they run in them)."""
        with self.ledger.spend(CALL):
            calls = [(call, self.game.plan_collect(call.member) if call.kind == "collect"
                      else None) for call in self.scheduler.next_calls()]
        self.fleet.submit(calls)
        finished = self.fleet.finished(timeout_s=0.5)
        with self.ledger.spend(CALL):
            for call, result in finished:
                self._handle(call, result)
            try:
                self._evolve()
            except Cancelled:
                return  # the stop is set: the next turn ends the loop
            self.recorder.maybe_write()
            self.fleet.tick()

    def _count_time(self) -> None:
        """Where the run's time went, for the summary and the last metrics."""
        self.time = time_shares([*self.fleet.time_spent(), self.ledger.read()])
        self.recorder.note_time(self.time)

    def _final_evaluation(self) -> None:
        """The final evaluation; a stop meanwhile ends the run as stopped, without one."""
        try:
            self.generations.final_evaluation(self.final_episodes, self.final_seed)
        except Cancelled:
            reason, self.interrupted = stop_details(self.stop_requested)
            self.state.cut_short(reason)

    def _handle(self, call: Call, result: Any) -> None:
        """Hand a finished call's result (or a learner's report) to the scheduler and the
        member's record."""
        m = self.state.members[call.member]
        self.scheduler.on_result(call, result)
        if call.kind == "collect":
            m.record_episodes(result.episode_scores)
            self.game.record_training(result.match_results, result.capped_episodes)
        else:
            m.record_train(result.seconds, result.metrics, result.compile_seconds,
                           result.step_fallbacks)

    def _evolve(self) -> None:
        """Members that reached their boundary wait; the strategy's due groups evolve; the
        run ends when every member is done."""
        for m in self.state.members:
            self.scheduler.at_boundary(m.member)
        self.generations.evolve()
        if all(m.phase == DONE for m in self.state.members):
            self.state.stop("max_steps")

    def progress(self) -> dict[str, Any]:
        """:func:`progress`, and the game's (a league: each side's best rating)."""
        return progress(self.state, self.max_env_steps) | self.game.progress()

    def summary(self) -> dict[str, Any]:
        state = self.state
        return {
            "stop_reason": state.stop_reason,
            "env_steps": state.total_env_steps,
            "wall_seconds": time.time() - state.started,
            "setup_seconds": self.setup_seconds,
            "setup_phases": self.setup_phases,
            "env_steps_per_s": state.env_steps_per_s(),
            "updates": state.updates(),
            "generations": state.generation,
            "best_fitness": state.best_fitness(),
            **(state.final.to_json() if state.final is not None else {"final_score": None}),
            "fitness_history": state.fitness_history,
            "generation_marks": state.generation_marks,
            "members": [m.summary() for m in state.members],
            "learner_devices": self.fleet.learner_devices,
            "learner_steps": self.fleet.learner_steps,
            "compile_seconds": sum(m.compile_seconds for m in state.members),
            "step_fallbacks": [x for m in state.members for x in m.step_fallbacks],
            "time": self.time,
            "calls": dict(self.fleet.calls),
            "copies": state.copy_log,
            "events": state.events,
            "faults": self.fleet.faults.to_json(),
            **self.game.summary(),
            **self.recorder.summary(),
        }


class Coordinator:
    """The plain class behind :data:`CoordinatorActor`: ``run`` blocks; ``progress``,
    ``handles`` and ``stop`` answer meanwhile (the actor has several threads)."""

    def __init__(self, config: dict[str, Any], run_dir: str, resume: str | None = None,
                 ray_address: str | None = None, local: bool = False) -> None:
        self.cfg = ExperimentConfig.model_validate(config)
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.ray_address = ray_address
        self.local = local
        self.stop_requested = StopRequest()
        self.current: TrainingRun | None = None

    def run(self) -> dict[str, Any]:
        """Build the run's parts and train; returns the summary."""
        self.current = TrainingRun(self.cfg, self.run_dir, self.resume, self.ray_address,
                                   self.stop_requested, self.local)
        return self.current.run()

    def stop(self, reason: str = "stopped", interrupted: bool = False) -> bool:
        """End the run at the loop's next turn, its summary's ``stop_reason`` ``reason``;
        ``interrupted`` (a signal): no final evaluation, tracking runs closed as KILLED."""
        self.stop_requested.request(reason, interrupted)
        return True

    def progress(self) -> dict[str, Any]:
        if self.current is None:  # still setting up: nothing counted yet
            return progress(RunState(), self.cfg.training.max_steps_per_member * self.cfg.num_members)
        return self.current.progress()

    def handles(self) -> dict[str, Any]:
        """Actor handles, for tests and fault injection (once the run is set up on Ray)."""
        if self.current is None:
            raise RuntimeError("the run is still setting up: no actors yet")
        fleet = self.current.fleet
        if not isinstance(fleet, RayFleet):
            raise RuntimeError("the run is in process: it has no actors")
        return fleet.handles()


CoordinatorActor = ray.remote(max_concurrency=4)(Coordinator)  # type: ignore[call-overload]
