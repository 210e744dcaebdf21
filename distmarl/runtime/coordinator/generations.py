"""Between generations: evaluate, select, mutate, copy, through the fleet.

The decisions come from an evolution strategy (:mod:`distmarl.hpo.strategies`: pure, seeded
with this part's own ``Generator``): which groups of members evolve now, and what each step
changes. This module evaluates the group, asks the strategy, carries the step out through the
fleet's verbs (:class:`~distmarl.runtime.fleets.protocol.Fleet`) and records it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.collect.cancel import Cancelled
from distmarl.config import EvolutionConfig, RLParameterConfig, TrainingConfig
from distmarl.hpo import HyperparameterConfig, Lineage, MutationPlan, RLParameter, mean_fitness
from distmarl.hpo.strategies import EvolutionStrategy, Fitness, Group, Step
from distmarl.runtime.fleets.protocol import Copied, Fleet, Mutated
from distmarl.runtime.hooks.base import GameHooks
from distmarl.runtime.logic.run_state import DONE, WAIT, FinalEvaluation, RunState

log = logging.getLogger(__name__)


def make_hp_config(ranges: Mapping[str, RLParameterConfig],
                   algorithms: Sequence[str]) -> HyperparameterConfig:
    """The mutable hyperparameters' ranges (``evolution.hp_config``), checked against those
    of every one of ``algorithms`` (names: a mixed population's)."""
    hp_config = HyperparameterConfig(**{
        name: RLParameter(p.min, p.max, p.grow_factor, p.shrink_factor,
                          int if p.dtype == "int" else float)
        for name, p in ranges.items()})
    for algorithm in algorithms:
        hp_config.check_against(algorithm)
    return hp_config


class Generations:
    """Evolution of ``state``'s members through ``fleet``, as ``strategy`` plans it, until
    ``training``'s ``max_steps_per_member`` or its ``target`` fitness; decisions draw from a
    ``Generator`` seeded with ``seed``. Evaluations follow ``evo`` (episodes, steps,
    exploration) or, in a league, its games: the ``game`` hooks say."""

    def __init__(self, evo: EvolutionConfig, training: TrainingConfig, seed: int, fleet: Fleet,
                 state: RunState, hp_config: HyperparameterConfig, strategy: EvolutionStrategy,
                 game: GameHooks, evo_steps: Sequence[int] | None = None
                 ) -> None:
        self.evo = evo
        self.max_steps = training.max_steps_per_member
        self.target = training.target
        self.fleet, self.state = fleet, state
        self.rng = np.random.default_rng(seed)
        self.hp_config = hp_config
        self.strategy = strategy
        #: what depends on the game: evaluations, final games, a league's snapshots
        self.game = game
        #: each member's env steps between its evolution steps
        self.evo_steps = (list(evo_steps) if evo_steps is not None
                          else [evo.evo_steps] * len(state.members))
        self.lineage = Lineage([m.hp for m in state.members],
                               [m.algorithm for m in state.members])

    # ------------------------------------------------------------------ evolution
    def evolve(self) -> None:
        """Evolve every group the strategy says is due (members waiting at their boundary)."""
        waiting = [m.phase == WAIT for m in self.state.members]
        for group in self.strategy.due(waiting):
            if self.state.running:
                self.evolve_group(group)

    def evolve_group(self, group: Group) -> None:
        """Evaluate ``group``, then (unless the run reached its target, or every member of
        the group its steps: they are then done) carry out and record the strategy's step;
        its members run on to their next boundary."""
        members, state = group.members, self.state.members
        self.evaluate(members)
        advanced = self.state.end_step(members)
        if self._target_reached():
            return
        if all(state[i].env_steps >= self.max_steps for i in members):
            for i in members:
                state[i].phase = DONE
            return
        if advanced:
            self.game.after_generation(self.state.generation)
        step = self.strategy.plan(group, Fitness([m.fitness for m in state]),
                                  [m.hp for m in state], self.rng)
        self.apply(step)
        for i in members:  # one that used its steps waits for the group's others
            self._next_boundary(i)

    def apply(self, step: Step) -> None:
        """Carry out ``step`` through the fleet, publish (and snapshot) every member it
        changed, once, and record it (events, family tree)."""
        state = self.state.members
        changed: set[int] = set()
        if step.copies or step.mutations:
            changed |= self.carry_out(step.copies, step.mutations)
        if step.hp_from:
            values = {i: dict(state[src].hp) for i, src in step.hp_from}
            for i, hp in self.fleet.set_hyperparameters(values).items():
                state[i].hp = hp
            changed |= set(values)
        if changed:
            self.fleet.publish(sorted(changed), snapshot=True)
        self.game.copied(step.copies)
        if step.selection is not None:
            self.lineage.record_generation(step.selection, step.mutations,
                                           [m.hp for m in state])
        for member, source, plan in step.lineage_copies:
            self.lineage.record_copy(member, source, plan, state[member].hp)
        for event in step.events:
            self.state.event(**event)

    def sample_initial_hp(self) -> None:
        """Start every member from hyperparameters drawn from the ``hp_config`` ranges
        (``evolution.initial_hp: sampled``): set on the learners (before the fleet's
        :meth:`~distmarl.runtime.fleets.protocol.Fleet.watch` publishes every member), and the
        family tree's roots."""
        members = self.state.members
        values = self.hp_config.sample(len(members), self.rng)
        hps = self.fleet.set_hyperparameters(dict(enumerate(values)))
        for m in members:
            m.hp = hps[m.member]
        self.lineage = Lineage([m.hp for m in members], [m.algorithm for m in members])
        self.state.event(initial_hp="sampled", values=[dict(v) for v in values])

    def pretrain_mutation(self) -> None:
        """Mutate every member once before training (AgileRL's pre-training mutation pass;
        none where the strategy changes no member), before the fleet's
        :meth:`~distmarl.runtime.fleets.protocol.Fleet.watch` publishes every member."""
        plans = self.strategy.pretrain([m.hp for m in self.state.members], self.rng)
        if plans:
            self.carry_out([], plans)
            self.lineage.record_generation(None, plans, [m.hp for m in self.state.members])

    def _target_reached(self) -> bool:
        """Whether the best fitness reached ``training.target``: the run then ends."""
        best = self.state.best_fitness()
        if self.target is None or best is None or best < self.target:
            return False
        self.state.stop("target")
        for m in self.state.members:
            m.phase = DONE
        return True

    def _next_boundary(self, member: int) -> None:
        self.state.members[member].next_boundary(self.evo_steps[member], self.max_steps)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, members: Sequence[int]) -> dict[int, float]:
        """The members' latest weights (published where they learned since their last
        publish), then the game's evaluation (episodes, or a league's games), seeded alike for
        everyone so the comparison is fair; appends to each fitness. A learner Ray restarted
        meanwhile is restored (its weights republished) by the fleet. A stop cuts it short
        (:class:`~distmarl.collect.cancel.Cancelled`, raised on): nothing is recorded."""
        self._publish_latest(members)
        before = self.rng.bit_generator.state
        seed = int(self.rng.integers(2**31))
        try:
            evaluated = self.game.evaluate(members, seed)
        except Cancelled:  # a stop: no result, and a resume draws the same seed again
            self.rng.bit_generator.state = before
            raise
        self._report_capped(evaluated.name, evaluated.capped)
        for i in members:
            self.state.members[i].evaluated(evaluated.fitness[i])
            self.lineage.record_fitness(i, evaluated.fitness[i])
        return evaluated.fitness

    def final_evaluation(self, episodes: int, seed: int) -> FinalEvaluation:
        """Every member's newest weights on the game's final evaluation (``episodes`` fixed
        episodes or games each, seeded by ``seed``, with random play's beside them); the elite
        is the member selection ranks first by fitness. Sets ``state.final``."""
        members = self.state.members
        self._publish_latest(range(len(members)))
        fitness = [mean_fitness(m.fitness, self.evo.eval_loop) for m in members]
        self.state.final, capped = self.game.final(fitness, episodes, seed)
        self._report_capped("final", capped)
        return self.state.final

    def _publish_latest(self, members: Iterable[int]) -> None:
        """Publish each of ``members`` whose learner learned since its last publish (the
        others' published weights are their latest already)."""
        behind = [i for i in members if not self.state.members[i].published_latest]
        if behind:
            self.fleet.publish(behind)

    def _report_capped(self, evaluation: str, capped: Mapping[int, int]) -> None:
        """Episodes or games of an evaluation that the env's step limit cut (partial scores;
        draws in a league), per member: an event in the run's record and a warning, when
        there are any."""
        counts = {int(i): int(n) for i, n in capped.items() if n}
        if not counts:
            return
        self.state.event(evaluation=evaluation, capped_episodes=counts,
                         generation=self.state.generation)
        log.warning("%s evaluation: %d episode(s) reached the step limit (env.max_episode_steps) "
                    "unfinished, members %s: their partial scores count (a league game: a "
                    "draw)", evaluation, sum(counts.values()), sorted(counts))

    # ------------------------------------------------------------------ copy and mutate
    def carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                  ) -> set[int]:
        """Copy full states (``(member, source)`` pairs), then mutate, through the fleet;
        record what changed. The members changed (their weights not yet published)."""
        algorithms = [m.algorithm for m in self.state.members]  # before any copy (may swap)
        copied, mutated = self.fleet.carry_out(copies, plans)
        self._record_copies(copied, algorithms)
        self._record_mutations(mutated)
        return {c.member for c in copied} | {m.plan.member for m in mutated}

    def _record_copies(self, copied: Sequence[Copied], algorithms: Sequence[str]) -> None:
        members = self.state.members
        for c in copied:
            i, src = c.member, c.source
            members[i].hp = c.hp
            if algorithms[i] != algorithms[src]:  # a converting population
                members[i].algorithm = algorithms[src]
                self.state.event(member=i, converted=algorithms[src], was=algorithms[i])
            self.state.copy_log.append({"generation": self.state.generation, "member": i,
                                        "source": src})

    def _record_mutations(self, mutated: Sequence[Mutated]) -> None:
        for m in mutated:
            self.state.members[m.plan.member].hp = m.hp
            self.state.event(member=m.plan.member, mutation=m.plan.describe(),
                             change=_plain(m.change))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Lineage, RNG and the game's plain state (a league's); the snapshots' weights are
        :meth:`snapshot_weights`."""
        return {"lineage": self.lineage.to_json(), "rng": self.rng.bit_generator.state,
                **self.game.state_dict()}

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        """A league's frozen snapshots' weights by id (none in a cooperative run)."""
        return self.game.snapshot_weights()

    def load_state_dict(self, d: dict[str, Any],
                        snapshots: dict[str, dict[str, Any]] | None = None) -> None:
        """Restore :meth:`state_dict` output (and a league's snapshots' weights)."""
        self.lineage = Lineage.from_json(d["lineage"])
        self.rng.bit_generator.state = d["rng"]
        self.game.load_state_dict(d, snapshots or {})


def _plain(change: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in change.items()
            if isinstance(v, str | int | float | bool | list | dict)}
