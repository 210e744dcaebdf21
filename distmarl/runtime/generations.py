"""Between generations: evaluate, select, mutate, copy, through the fleet.

The decisions come from an evolution strategy (:mod:`distmarl.hpo.strategies`: pure, seeded
with this part's own ``Generator``): which groups of members evolve now, and what each step
changes. This module evaluates the group, asks the strategy, carries the step out through the
fleet's verbs (:class:`~distmarl.runtime.fleet.Fleet`) and records it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.config import EvolutionConfig, RLParameterConfig, TrainingConfig
from distmarl.hpo import HyperparameterConfig, Lineage, MutationPlan, RLParameter, mean_fitness
from distmarl.hpo.league_final import RANDOM, pooled, rows_of
from distmarl.hpo.league_state import member_id
from distmarl.hpo.strategies import EvolutionStrategy, Fitness, Group, Step
from distmarl.hpo.tournament import rank
from distmarl.runtime.fleet import Copied, Fleet, Mutated
from distmarl.runtime.league import LeagueRun
from distmarl.runtime.run_state import DONE, WAIT, FinalEvaluation, RunState

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
    ``training``'s ``max_steps`` per member or its ``target`` fitness; decisions draw from a
    ``Generator`` seeded with ``seed``. Evaluations follow ``evo`` (episodes, steps,
    exploration); a ``league`` rates members by their games instead."""

    def __init__(self, evo: EvolutionConfig, training: TrainingConfig, seed: int, fleet: Fleet,
                 state: RunState, hp_config: HyperparameterConfig, strategy: EvolutionStrategy,
                 league: LeagueRun | None = None, evo_steps: Sequence[int] | None = None
                 ) -> None:
        self.evo = evo
        self.max_steps = training.max_steps
        self.target = training.target
        self.fleet, self.state = fleet, state
        self.rng = np.random.default_rng(seed)
        self.hp_config = hp_config
        self.strategy = strategy
        #: a competitive game's league: fitness is a rating
        self.league = league
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
        if advanced and self.league is not None:
            self.league.after_generation(self.state.generation)
        step = self.strategy.plan(group, Fitness([m.fitness for m in state]),
                                  [m.hp for m in state], self.rng)
        self.apply(step)
        for i in members:  # one that used its steps waits for the group's others
            self._next_boundary(i)

    def apply(self, step: Step) -> None:
        """Carry out ``step`` through the fleet and record it (events, family tree)."""
        state = self.state.members
        if step.copies or step.mutations:
            self.carry_out(step.copies, step.mutations)
        if step.hp_from:
            values = {i: dict(state[src].hp) for i, src in step.hp_from}
            for i, hp in self.fleet.set_hyperparameters(values).items():
                state[i].hp = hp
            self.fleet.publish(sorted(values), snapshot=True)
        if self.league is not None:
            self.league.copied(step.copies)
        if step.selection is not None:
            self.lineage.record_generation(step.selection, step.mutations,
                                           [m.hp for m in state])
        for member, source, plan in step.lineage_copies:
            self.lineage.record_copy(member, source, plan, state[member].hp)
        for event in step.events:
            self.state.event(**event)

    def sample_initial_hp(self) -> None:
        """Start every member from hyperparameters drawn from the ``hp_config`` ranges
        (``evolution.initial_hp: sampled``): set on the learners, published to the workers,
        and the family tree's roots."""
        members = self.state.members
        values = self.hp_config.sample(len(members), self.rng)
        hps = self.fleet.set_hyperparameters(dict(enumerate(values)))
        for m in members:
            m.hp = hps[m.member]
        self.fleet.publish(list(range(len(members))), snapshot=True)
        self.lineage = Lineage([m.hp for m in members], [m.algorithm for m in members])
        self.state.event(initial_hp="sampled", values=[dict(v) for v in values])

    def pretrain_mutation(self) -> None:
        """Mutate every member once before training (AgileRL's pre-training mutation pass;
        none where the strategy changes no member)."""
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
        """Fresh weights, then evaluation episodes (``evolution.eval_explore``); appends to each
        fitness. A learner or worker Ray restarted meanwhile is restored / asked again;
        weights lost with their learner's node are republished from the restored learner."""
        self.fleet.publish(members)
        seed = int(self.rng.integers(2**31))  # the same episodes for everyone: fair comparisons
        if self.league is not None:
            return self._evaluate_league(members, seed)
        results = self.fleet.evaluate(members, self.evo.eval_episodes, self.evo.eval_steps,
                                      seed, self.evo.eval_explore)
        self._report_capped("fitness", {i: r.capped for i, r in zip(members, results)})
        fitness = {}
        for i, scores in zip(members, results):
            fitness[i] = float(np.mean(scores))
            self.state.members[i].evaluated(fitness[i])
            self.lineage.record_fitness(i, fitness[i])
        return fitness

    def _evaluate_league(self, members: Sequence[int], seed: int) -> dict[int, float]:
        """Every member's evaluation games against its league opponents, their results rated
        in member order (so the ratings do not depend on which call finished first); fitness
        is each member's rating."""
        assert self.league is not None
        games = {i: self.league.evaluation_games(i, seed) for i in members}
        results = iter(self.fleet.play([g for i in members for g in games[i]]))
        capped = {i: self.league.record_evaluation([next(results) for _ in games[i]])
                  for i in members}
        self._report_capped("league evaluation", capped)
        fitness = {}
        for i in members:
            fitness[i] = self.league.fitness(i)
            self.state.members[i].evaluated(fitness[i])
            self.lineage.record_fitness(i, fitness[i])
        return fitness

    def final_evaluation(self, episodes: int, seed: int) -> FinalEvaluation:
        """Every member's newest weights, and a uniform random policy, on the same fixed
        ``episodes`` episodes seeded by ``seed``; the elite is the member selection ranks first
        by fitness. Sets ``state.final``."""
        members = self.state.members
        indices = list(range(len(members)))
        self.fleet.publish(indices)
        if self.league is not None:
            return self._final_league(episodes, seed)
        scores, random_scores = self.fleet.score_fixed(indices, episodes, seed,
                                                       self.evo.eval_explore)
        self._report_capped("final", {i: s.capped for i, s in enumerate(scores)})
        fitness = [mean_fitness(m.fitness, self.evo.eval_loop) for m in members]
        self.state.final = FinalEvaluation(
            episodes=episodes, seed=seed, elite=rank(fitness)[0],
            scores=[float(np.mean(s)) for s in scores],
            stderr=[float(np.std(s) / np.sqrt(len(s))) for s in scores],
            random_score=float(np.mean(random_scores)))
        return self.state.final

    def _final_league(self, games: int, seed: int) -> FinalEvaluation:
        """A league's final games (:mod:`distmarl.hpo.league_final`): every member against
        the references, the sides' elites (ranked by rating within their side) against each
        other, and random play's baseline; ``games`` each."""
        assert self.league is not None
        elites = self.league.elites(
            [mean_fitness(m.fitness, self.evo.eval_loop) for m in self.state.members])
        plan = self.league.final_games(elites, seed)
        rows = self.league.final_rows(plan, self.fleet.play(
            [self.league.final_play(g, games) for g in plan]))
        self._report_capped("final", {i: sum(r["capped"] for r in rows_of(rows, member_id(i)))
                                      for i in range(len(self.state.members))})
        scores = [pooled(rows_of(rows, member_id(i))) for i in range(len(self.state.members))]
        first = next(iter(elites))
        self.state.final = FinalEvaluation(
            episodes=games, seed=seed, elite=elites[first], scores=[s for s, _ in scores],
            stderr=[e for _, e in scores],
            random_score=pooled(rows_of(rows, RANDOM, "baseline", first))[0],
            elites=elites, games=rows)
        return self.state.final

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
    def carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]) -> None:
        """Copy full states (``(member, source)`` pairs), then mutate, through the fleet
        (which publishes the changed members); record what changed."""
        algorithms = [m.algorithm for m in self.state.members]  # before any copy (may swap)
        copied, mutated = self.fleet.carry_out(copies, plans)
        self._record_copies(copied, algorithms)
        self._record_mutations(mutated)

    def _record_copies(self, copied: Sequence[Copied], algorithms: Sequence[str]) -> None:
        members = self.state.members
        for c in copied:
            i, src = c.member, c.source
            members[i].hp = c.hp
            if algorithms[i] != algorithms[src]:  # a converting population
                members[i].algorithm = algorithms[src]
                self.state.event(member=i, converted=algorithms[src], was=algorithms[i])
            self.state.copy_log.append({"generation": self.state.generation, "member": i,
                                        "source": src, "source_checksum": c.source_checksum,
                                        "copy_checksum": c.copy_checksum})

    def _record_mutations(self, mutated: Sequence[Mutated]) -> None:
        for m in mutated:
            self.state.members[m.plan.member].hp = m.hp
            self.state.event(member=m.plan.member, mutation=m.plan.describe(),
                             change=_plain(m.change))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Lineage, RNG and (a league run) the league's plain state; the snapshots' weights
        are :meth:`snapshot_weights`."""
        out = {"lineage": self.lineage.to_json(), "rng": self.rng.bit_generator.state}
        if self.league is not None:
            out["league"] = self.league.state_dict()
        return out

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        """A league's frozen snapshots' weights by id (none in a cooperative run)."""
        return {} if self.league is None else self.league.snapshot_weights()

    def load_state_dict(self, d: dict[str, Any],
                        snapshots: dict[str, dict[str, Any]] | None = None) -> None:
        """Restore :meth:`state_dict` output (and a league's snapshots' weights)."""
        self.lineage = Lineage.from_json(d["lineage"])
        self.rng.bit_generator.state = d["rng"]
        if self.league is not None:
            if "league" not in d:
                raise ValueError("the checkpoint holds no league: it is of a cooperative run")
            self.league.load_state_dict(d["league"], snapshots or {})


def _plain(change: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in change.items()
            if isinstance(v, str | int | float | bool | list | dict)}
