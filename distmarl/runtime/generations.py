"""Between generations: evaluate, select, mutate, copy, through the fleet.

The decisions come from :mod:`distmarl.hpo` (pure, seeded with this part's own
``Generator``); this module carries them out through the fleet's verbs
(:class:`~distmarl.runtime.fleet.Fleet`). Synchronous mode
evolves the whole population once every member reached its boundary
(:meth:`Generations.evolve_sync`); asynchronous mode (population-based training) evolves each
member at its own boundary (:meth:`Generations.evolve_async`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.config import EvolutionConfig, RLParameterConfig, TrainingConfig
from distmarl.hpo import (
    HyperparameterConfig,
    Lineage,
    MutationPlan,
    Mutations,
    RLParameter,
    TournamentSelection,
)
from distmarl.hpo.league_final import RANDOM, pooled, rows_of
from distmarl.hpo.league_state import member_id
from distmarl.hpo.multi_frequency import MultiFrequency
from distmarl.hpo.pbt import AsyncExploit
from distmarl.hpo.tournament import SelectionPlan, rank, select_by_side
from distmarl.runtime.fleet import Copied, Fleet, Mutated
from distmarl.runtime.league import LeagueRun
from distmarl.runtime.run_state import DONE, FinalEvaluation, RunState

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
    """Evolution of ``state``'s members through ``fleet``'s learners, as ``evo`` says, until
    ``training``'s ``max_steps`` per member or its ``target`` fitness; decisions draw from a
    ``Generator`` seeded with ``seed``."""

    def __init__(self, evo: EvolutionConfig, training: TrainingConfig, seed: int, fleet: Fleet,
                 state: RunState, hp_config: HyperparameterConfig,
                 league: LeagueRun | None = None, groups: Sequence[str] | None = None,
                 convert: bool = False, evo_steps: Sequence[int] | None = None) -> None:
        self.evo = evo
        self.max_steps = training.max_steps
        self.target = training.target
        self.fleet, self.state = fleet, state
        self.rng = np.random.default_rng(seed)
        self.hp_config = hp_config
        #: a competitive game's league: fitness is a rating, tournaments stay within a side
        self.league = league
        #: a mixed population's algorithm per member: members copy only their own algorithm's,
        #: or (``convert``) any member's, taking its algorithm with its state
        self.groups = None if groups is None else list(groups)
        self.convert = convert
        #: each member's env steps between its evolution steps
        self.evo_steps = (list(evo_steps) if evo_steps is not None
                          else [evo.evo_steps] * len(state.members))
        #: multi_frequency mode: the sub-populations and their steps' plans
        self.multi_frequency = None if evo.subpopulations is None else MultiFrequency(
            _consecutive([s.size for s in evo.subpopulations]), evo.top_frac, evo.bottom_frac,
            evo.migration_frac)
        per_side = len(state.members) if league is None else \
            len(state.members) // len(set(league.league.side_of_member))
        self.selection = TournamentSelection(evo.tournament.size, evo.tournament.elitism,
                                             per_side, evo.eval_loop)
        m = evo.mutation
        self.mutations = Mutations(m.no_mutation, m.architecture, m.new_layer_prob, m.parameters,
                                   m.activation, m.rl_hp, m.mutation_sd, m.activation_selection,
                                   m.mutate_elite)
        self.exploit = AsyncExploit(evo.bottom_frac, evo.top_frac)
        self.lineage = Lineage([m.hp for m in state.members],
                               [m.algorithm for m in state.members])

    # ------------------------------------------------------------------ modes
    def evolve_sync(self) -> None:
        """One generation: evaluate everyone, tournament, mutate, carry out, record."""
        members = self.state.members
        self.evaluate(list(range(len(members))))
        self.state.end_generation()
        if self._finished():
            return
        if self.league is not None:
            self.league.after_generation(self.state.generation)
        if self.evo.mode != "independent":  # independent: no selection, no mutation
            plan = self._select([m.fitness for m in members])
            hps = [members[src].hp for src in plan.sources]
            plans = self.mutations.plan(hps, self.hp_config, self.rng, elite=plan.elites)
            self.carry_out(plan.copies(), plans)
            if self.league is not None:
                self.league.copied(plan.copies())
            self.lineage.record_generation(plan, plans, [m.hp for m in members])
        for member in range(len(members)):
            self._next_boundary(member)

    def _select(self, histories: list[list[float]]) -> SelectionPlan:
        """Tournament selection over the population, or within each side of a league, or
        within each algorithm of a mixed population."""
        if self.league is not None:
            return select_by_side(self.selection, histories, self.league.league.side_of_member,
                                  self.rng)
        if self.groups is not None and not self.convert:
            return select_by_side(self.selection, histories, self.groups, self.rng)
        return self.selection.select(histories, self.rng)

    def evolve_subpopulation(self, sub: int) -> None:
        """Multiple-frequencies PBT: sub-population ``sub``'s members all reached their
        boundary: evaluate them, clone winners over losers (the clones mutate), let better
        members of other sub-populations migrate into its open slots (weights only from a
        faster one: the slot takes its elite's hyperparameters), record, run on."""
        assert self.multi_frequency is not None
        members = self.multi_frequency.subpopulations[sub]
        self.evaluate(members)
        self.state.end_subpopulation(members)
        if self._finished(check_steps=False):
            return
        if all(self.state.members[i].env_steps >= self.max_steps for i in members):
            for i in members:
                self.state.members[i].phase = DONE
            return
        state = self.state.members
        latest = {m.member: m.fitness[-1] for m in state if m.fitness}
        step = self.multi_frequency.plan(sub, latest, self.rng)
        plans = [dataclasses.replace(self.mutations.plan([state[src].hp], self.hp_config,
                                                         self.rng, force=True)[0], member=i)
                 for i, src in step.clones]
        elite_hp = {m.member: dict(state[m.elite].hp) for m in step.migrations
                    if m.weights_only}
        self.carry_out(step.copies(), plans)
        if elite_hp:
            for i, hp in self.fleet.set_hyperparameters(elite_hp).items():
                state[i].hp = hp
            self.fleet.publish(sorted(elite_hp), snapshot=True)
        for (i, src), plan in zip(step.clones, plans):
            self.lineage.record_copy(i, src, plan, state[i].hp)
        for m in step.migrations:
            self.lineage.record_copy(m.member, m.source, None, state[m.member].hp)
            self.state.event(member=m.member, migrated_from=m.source,
                             weights_only=m.weights_only)
        for i in members:
            if state[i].env_steps >= self.max_steps:
                state[i].phase = DONE
            else:
                self._next_boundary(i)

    def evolve_async(self, member: int) -> None:
        """Population-based training's exploit and explore for one member at its boundary."""
        self.evaluate([member])
        m = self.state.members[member]
        self.state.end_evolution()
        if self._finished(check_steps=False):
            return
        if m.env_steps >= self.max_steps:
            m.phase = DONE
            return
        latest = {x.member: x.fitness[-1] for x in self.state.members
                  if x.fitness and (self.groups is None or self.convert
                                    or self.groups[x.member] == self.groups[member])}
        source = self.exploit.decide(member, latest, self.rng)
        if source is not None:
            plan = self.mutations.plan([self.state.members[source].hp], self.hp_config,
                                       self.rng, force=True)[0]
            plan = dataclasses.replace(plan, member=member)
            self.carry_out([(member, source)], [plan])
            self.lineage.record_copy(member, source, plan, m.hp)
        self._next_boundary(member)

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
        """Mutate every member once before training (AgileRL's pre-training mutation pass)."""
        plans = self.mutations.plan([m.hp for m in self.state.members], self.hp_config,
                                    self.rng, force=True)
        self.carry_out([], plans)
        self.lineage.record_generation(None, plans, [m.hp for m in self.state.members])

    def _finished(self, check_steps: bool = True) -> bool:
        """Set the stop reason when the target is reached or (``check_steps``) every member
        used its steps. Asynchronous mode checks steps per member instead: each has its last
        evaluation before it is done."""
        best = self.state.best_fitness()
        if self.target is not None and best is not None and best >= self.target:
            self.state.stop("target")
        elif check_steps and all(m.env_steps >= self.max_steps for m in self.state.members):
            self.state.stop("max_steps")
        else:
            return False
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
        fitness = self.selection.fitness([m.fitness for m in members])
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
            self.selection.fitness([m.fitness for m in self.state.members]))
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
                if self.groups is not None:
                    self.groups[i] = algorithms[src]
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
        if self.groups is not None:  # a converting population's members may have changed
            self.groups = [m.algorithm or g for m, g in zip(self.state.members, self.groups)]
        if self.league is not None:
            if "league" not in d:
                raise ValueError("the checkpoint holds no league: it is of a cooperative run")
            self.league.load_state_dict(d["league"], snapshots or {})


def _plain(change: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in change.items()
            if isinstance(v, str | int | float | bool | list | dict)}


def _consecutive(sizes: Sequence[int]) -> list[list[int]]:
    """Members numbered through groups of ``sizes`` in order: ``[2, 3]`` -> ``[[0, 1], [2, 3, 4]]``."""
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out
