"""The run's counters as plain data: one :class:`MemberState` per population member and one
:class:`RunState` for the run (generation, env steps, buffer rows, stop reason, events).

No Ray calls here. The parts of the runtime each write their own fields of these records:
the scheduler the scheduling counters (``owed``, ``scheduled_steps``, ``env_steps``,
``updates``, ``version``) and ``phase`` when a member reaches its boundary;
generations the population fields (``hp`` after a copy or mutation, ``fitness``,
``boundary``, ``phase`` after an evolution step) and ``final``, the final evaluation; the
fleet ``hp`` of a learner it restored; the coordinator the statistics (scores, seconds).
:meth:`RunState.state_dict` is what a checkpoint keeps.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distmarl.config.replay import stored_hp

#: phases of a member inside a generation
RUN, WAIT, DONE = "run", "wait", "done"


@dataclass
class MemberState:
    """Counters of population member ``member``. ``env_steps`` only move forward; ``owed``
    (on-policy) counts the rollout fragments that reached the buffer and are not learned yet
    (off-policy members' updates are owed where their data is: the buffer's grants)."""

    member: int
    boundary: int
    hp: dict[str, Any]
    env_steps: int = 0
    scheduled_steps: int = 0  # env_steps plus those of collect calls in flight
    owed: float = 0.0
    updates: int = 0
    version: int = 0
    weights_box: list[Any] | None = None  # [ref] of the published weights of ``version``
    #: the published weights are the learner's latest: it has learned nothing since
    published_latest: bool = False
    phase: str = RUN
    fitness: list[float] = field(default_factory=list)
    scores: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    episodes: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    train_seconds: float = 0.0
    compile_seconds: float = 0.0  # of its learning, compiling or capturing update steps
    step_fallbacks: list[str] = field(default_factory=list)  # failed compilations, captures
    max_lag_seen: int = 0  # most weight versions a finished chunk lagged behind the learner
    evaluated_at: int = -1  # the boundary of the last evaluation (its generation is done)
    algorithm: str = ""  # the member's algorithm (a mixed population's differ)

    @property
    def learn_step(self) -> float:
        return float(self.hp.get("learn_step", 1))

    def record_episodes(self, scores: list[float]) -> None:
        """Episodes a collect call finished, with their scores."""
        self.scores.extend(scores)
        self.episodes += len(scores)

    def record_train(self, seconds: float, metrics: dict[str, float],
                     compile_seconds: float = 0.0, step_fallbacks: Sequence[str] = ()) -> None:
        """Its learner's time and metrics since it last said (the latest with any are kept); the
        part of it spent compiling or capturing update steps, and those that failed."""
        self.train_seconds += seconds
        self.compile_seconds += compile_seconds
        self.step_fallbacks.extend(step_fallbacks)
        if metrics:
            self.metrics = metrics

    def evaluated(self, fitness: float) -> None:
        """Its evaluation at the current boundary scored ``fitness``."""
        self.fitness.append(fitness)
        self.evaluated_at = self.boundary

    def next_boundary(self, evo_steps: int, max_steps: int) -> None:
        """Run on to the next evolution step (``evo_steps`` on, at most ``max_steps``)."""
        self.boundary = min(self.boundary + evo_steps, max_steps)
        self.phase = RUN

    def set_weights(self, version: int, box: list[Any] | None) -> None:
        """The learner published ``version``; its rollout workers act with ``box`` next."""
        self.version, self.weights_box = version, box
        self.published_latest = True

    def mean_score(self) -> float | None:
        return float(sum(self.scores) / len(self.scores)) if self.scores else None

    def summary(self) -> dict[str, Any]:
        return {"member": self.member, "algorithm": self.algorithm, "fitness": self.fitness,
                "hp": self.hp,
                "env_steps": self.env_steps, "updates": self.updates,
                "max_policy_lag_seen": self.max_lag_seen, "mean_score": self.mean_score(),
                "compile_seconds": self.compile_seconds,
                "episodes": self.episodes}

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "boundary": self.boundary, "hp": dict(self.hp),
                "env_steps": self.env_steps, "owed": self.owed, "updates": self.updates,
                "fitness": list(self.fitness), "scores": list(self.scores),
                "episodes": self.episodes, "evaluated_at": self.evaluated_at,
                "algorithm": self.algorithm}

    @staticmethod
    def from_json(d: dict[str, Any]) -> MemberState:
        """The inverse of :meth:`to_json`; also reads checkpoints that name the member
        ``slot`` or hold a ``replay_ratio`` of 0 (:func:`stored_hp`)."""
        member = d["member"] if "member" in d else d["slot"]
        m = MemberState(member=int(member), boundary=d["boundary"], hp=stored_hp(d["hp"]),
                        env_steps=d["env_steps"], owed=d["owed"], updates=d["updates"],
                        fitness=list(d["fitness"]), episodes=d["episodes"],
                        evaluated_at=d.get("evaluated_at", -1),
                        algorithm=str(d.get("algorithm", "")))
        m.scheduled_steps = m.env_steps
        m.scores.extend(d["scores"])
        return m


@dataclass(frozen=True)
class FinalEvaluation:
    """Every member and a uniform random policy scored on the same fixed ``episodes``
    episodes (seeded by ``seed``): ``scores[i]`` is member ``i``'s mean, ``stderr[i]`` its
    standard error. The run's result is the ``elite``'s score; the elite is the member
    selection ranks first by fitness (choosing it by these scores would flatter it).

    A league run's scores are score rates (wins, draws half) of each member against the
    references over ``episodes`` games each, random play's beside them; ``elites`` (side ->
    member; ``elite`` is the first side's) and ``games`` (one row per opponent, see
    :func:`~distmarl.league.final.final_rows`) say the rest."""

    episodes: int
    seed: int
    elite: int
    scores: list[float]
    stderr: list[float]
    random_score: float
    elites: dict[str, int] | None = None
    games: list[dict[str, Any]] | None = None

    @property
    def final_score(self) -> float:
        return self.scores[self.elite]

    def to_json(self) -> dict[str, Any]:
        return {"final_score": self.final_score, "final_score_stderr": self.stderr[self.elite],
                "random_score": self.random_score, "elite": self.elite,
                "final_episodes": self.episodes, "final_seed": self.seed,
                "final_scores": list(self.scores), "final_stderr": list(self.stderr),
                **({} if self.games is None else
                   {"final_elites": dict(self.elites or {}), "final_games": list(self.games)})}

    @staticmethod
    def from_json(d: dict[str, Any]) -> FinalEvaluation:
        return FinalEvaluation(episodes=int(d["final_episodes"]), seed=int(d["final_seed"]),
                               elite=int(d["elite"]), scores=list(d["final_scores"]),
                               stderr=list(d["final_stderr"]),
                               random_score=float(d["random_score"]),
                               elites=d.get("final_elites"), games=d.get("final_games"))


class RunState:
    """The run's counters. ``total_env_steps`` and ``buffer_rows`` count every transition
    collected (the buffer may hold fewer: it is a ring); ``events`` and ``copy_log`` are the
    run's history of faults, mutations and copies, as JSON-ready dicts."""

    def __init__(self) -> None:
        self.members: list[MemberState] = []
        self.generation = 0
        self.evolutions = 0  # single-member evolution steps (asynchronous mode)
        self.total_env_steps = 0
        self.buffer_rows = 0
        self.stop_reason = "running"
        self.events: list[dict[str, Any]] = []
        self.copy_log: list[dict[str, Any]] = []
        self.fitness_history: list[list[float]] = []
        #: per generation: (seconds of training since the clock started, total env steps) when
        #: its evaluation ended, beside ``fitness_history`` (time and steps to a score)
        self.generation_marks: list[tuple[float, int]] = []
        self.final: FinalEvaluation | None = None  # set once, when the run has ended
        self.started = time.time()
        self._clock_t0 = time.perf_counter()
        self._clock_steps0 = 0

    @property
    def running(self) -> bool:
        return self.stop_reason == "running"

    def stop(self, reason: str) -> None:
        """End the run for ``reason`` (``max_steps``, ``target``, ``stopped``); the first
        reason stays."""
        if self.running:
            self.stop_reason = reason

    def cut_short(self, reason: str) -> None:
        """A stop cut short what the run does after its loop (the final evaluation): the run
        ends for ``reason``, whatever ended its loop."""
        self.stop_reason = reason

    def count_steps(self, env_steps: int) -> None:
        """``env_steps`` transitions were collected and stored."""
        self.total_env_steps += env_steps
        self.buffer_rows += env_steps

    def end_step(self, members: Sequence[int]) -> bool:
        """``members`` were evaluated for their evolution step: each counts one step, a
        generation is as many steps as there are members (synchronous mode: every member's at
        once), and the fitness history gets a row of every member's latest fitness (those
        evaluated so far), with the step's time and env steps. True when a generation ended."""
        before = self.generation
        self.evolutions += len(members)
        self.generation = self.evolutions // len(self.members)
        self.fitness_history.append([m.fitness[-1] for m in self.members if m.fitness])
        self.generation_marks.append(
            (round(time.perf_counter() - self._clock_t0, 3), self.total_env_steps))
        return self.generation > before

    def start_clock(self) -> None:
        """Throughput counts from here (after set-up, and after a resume's restored steps)."""
        self._clock_t0, self._clock_steps0 = time.perf_counter(), self.total_env_steps

    def env_steps_per_s(self) -> float:
        elapsed = time.perf_counter() - self._clock_t0
        return (self.total_env_steps - self._clock_steps0) / elapsed if elapsed > 0 else 0.0

    def event(self, **fields: Any) -> None:
        """Record an event of the current generation (a fault, a mutation)."""
        self.events.append({"generation": self.generation, **fields})

    def best_fitness(self) -> float | None:
        latest = [m.fitness[-1] for m in self.members if m.fitness]
        return max(latest) if latest else None

    def member_step(self) -> int:
        """The step metrics are logged at: env steps per member (the mean over members)."""
        return int(sum(m.env_steps for m in self.members) / max(1, len(self.members)))

    def updates(self) -> int:
        return sum(m.updates for m in self.members)

    def state_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "evolutions": self.evolutions,
                "total_env_steps": self.total_env_steps, "buffer_rows": self.buffer_rows,
                "members": [m.to_json() for m in self.members],
                "fitness_history": self.fitness_history,
                "generation_marks": [list(m) for m in self.generation_marks],
                "final": self.final.to_json() if self.final is not None else None,
                "copies": self.copy_log,
                "events": self.events}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.members = [MemberState.from_json(m) for m in d["members"]]
        self.generation = int(d["generation"])
        # a checkpoint of synchronous generations may count none of their steps
        self.evolutions = max(int(d.get("evolutions", 0)), self.generation * len(self.members))
        self.total_env_steps = int(d["total_env_steps"])
        self.buffer_rows = int(d["buffer_rows"])
        self.fitness_history = list(d["fitness_history"])
        self.generation_marks = [(float(t), int(n)) for t, n in d.get("generation_marks", [])]
        final = d.get("final")
        self.final = FinalEvaluation.from_json(final) if final else None
        self.copy_log = list(d.get("copies", []))
        self.events = list(d.get("events", []))
