"""Evolution strategies: when members evolve and what each step changes, decided in pure code.

A strategy answers two questions, each from plain data and an explicit ``Generator``:

- :meth:`EvolutionStrategy.due`: which groups of members evolve now, given which members
  reached their boundary and wait (the whole population once all wait; a sub-population once
  its members wait; each member on its own);
- :meth:`EvolutionStrategy.plan`: what a group's step changes, from the members' fitness and
  hyperparameters (:class:`Step`: state copies, then mutations, then hyperparameters taken
  from another member).

The run evaluates the group, asks for the plan, carries it out and records it; it never asks
which strategy it holds. Four strategies: :class:`Tournament` (AgileRL's generations),
:class:`Independent` (evaluated, never changed: evolution off), :class:`AsyncPBT`
(population-based training's exploit and explore, each member at its own boundary) and
:class:`MultipleFrequencies` (sub-populations at their own horizons, with migration).

Selection stays within *groups of members that may copy each other* (``labels``): a league's
sides, a mixed population's algorithms; None: anyone may copy anyone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from distmarl.config import EvolutionConfig
from distmarl.hpo.hyperparams import HyperparameterConfig
from distmarl.hpo.multi_frequency import MultiFrequency
from distmarl.hpo.mutation import MutationPlan, Mutations
from distmarl.hpo.pbt import AsyncExploit
from distmarl.hpo.tournament import SelectionPlan, TournamentSelection, select_by_side

__all__ = ["AsyncPBT", "EvolutionStrategy", "Fitness", "Group", "Independent",
           "MultipleFrequencies", "Step", "Tournament", "consecutive", "make_strategy"]


@dataclass(frozen=True)
class Group:
    """Members that evolve together now, in member order; ``subpopulation``: the index of the
    multiple-frequencies sub-population they are (None otherwise)."""

    members: tuple[int, ...]
    subpopulation: int | None = None


@dataclass(frozen=True)
class Fitness:
    """Every member's fitness after each of its evaluations, oldest first (a mean score, or
    in a league a rating): ``histories[m]``."""

    histories: Sequence[Sequence[float]]

    def latest(self, members: Sequence[int] | None = None) -> dict[int, float]:
        """Member -> its latest fitness, for ``members`` (default: all) that have one."""
        ids = range(len(self.histories)) if members is None else members
        return {m: float(self.histories[m][-1]) for m in ids if self.histories[m]}


@dataclass(frozen=True)
class Step:
    """What one group's evolution step changes, in the order it is carried out: ``copies``
    (``(member, source)`` full-state copies), then ``mutations``, then ``hp_from``
    (``(member, other)``: the member takes ``other``'s hyperparameters, keeping its weights).

    How the family tree records it: ``selection`` (a tournament's plan) advances it a
    generation; without one each copy is a new individual (``lineage_copies``: ``(member,
    source, plan)``). ``events`` go to the run's record as they are."""

    copies: tuple[tuple[int, int], ...] = ()
    mutations: tuple[MutationPlan, ...] = ()
    hp_from: tuple[tuple[int, int], ...] = ()
    selection: SelectionPlan | None = None
    lineage_copies: tuple[tuple[int, int, MutationPlan | None], ...] = ()
    events: tuple[dict[str, Any], ...] = field(default=())


class EvolutionStrategy(Protocol):
    """When members evolve, and what their step changes."""

    def pretrain(self, hps: Sequence[Mapping[str, Any]], rng: np.random.Generator
                 ) -> list[MutationPlan]:
        """AgileRL's pre-training pass: a mutation of every member (none where the strategy
        changes no member)."""

    def due(self, waiting: Sequence[bool]) -> list[Group]:
        """The groups to evolve now; ``waiting[m]``: member ``m`` reached its boundary."""

    def plan(self, group: Group, fitness: Fitness, hps: Sequence[Mapping[str, Any]],
             rng: np.random.Generator) -> Step:
        """``group``'s step from every member's ``fitness`` and hyperparameters ``hps``."""


def _forced(mutations: Mutations, hp_config: HyperparameterConfig, member: int,
            hp: Mapping[str, Any], rng: np.random.Generator) -> MutationPlan:
    """A mutation other than ``none`` of ``member``, drawn for hyperparameters ``hp`` (those of
    the member it just copied): a copy always explores."""
    plan = mutations.draw([hp], hp_config, rng, force=True)[0]
    return dataclasses.replace(plan, member=member)


def _pretrain(mutations: Mutations, hp_config: HyperparameterConfig,
              hps: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> list[MutationPlan]:
    """A mutation other than ``none`` for every member (AgileRL's pre-training pass)."""
    return mutations.draw(hps, hp_config, rng, force=True)


def _everyone(waiting: Sequence[bool]) -> list[Group]:
    """The whole population as one group once every member waits (a generation)."""
    return [Group(tuple(range(len(waiting))))] if all(waiting) else []


@dataclass
class Tournament:
    """AgileRL's generations: once every member waits, tournament selection with elitism
    (within each label's members) and a mutation per member."""

    selection: TournamentSelection
    mutations: Mutations
    hp_config: HyperparameterConfig
    labels: Sequence[str] | None = None

    def pretrain(self, hps: Sequence[Mapping[str, Any]], rng: np.random.Generator
                 ) -> list[MutationPlan]:
        return _pretrain(self.mutations, self.hp_config, hps, rng)

    def due(self, waiting: Sequence[bool]) -> list[Group]:
        return _everyone(waiting)

    def plan(self, group: Group, fitness: Fitness, hps: Sequence[Mapping[str, Any]],
             rng: np.random.Generator) -> Step:
        histories = fitness.histories
        selection = (self.selection.select(histories, rng) if self.labels is None
                     else select_by_side(self.selection, histories, self.labels, rng))
        plans = self.mutations.draw([hps[src] for src in selection.sources], self.hp_config,
                                    rng, elite=selection.elites)
        return Step(copies=tuple(selection.copies()), mutations=tuple(plans),
                    selection=selection)


@dataclass
class Independent:
    """Evolution off: once every member waits, all are evaluated and none changes (a control
    for what evolution adds)."""

    def pretrain(self, hps: Sequence[Mapping[str, Any]], rng: np.random.Generator
                 ) -> list[MutationPlan]:
        return []

    def due(self, waiting: Sequence[bool]) -> list[Group]:
        return _everyone(waiting)

    def plan(self, group: Group, fitness: Fitness, hps: Sequence[Mapping[str, Any]],
             rng: np.random.Generator) -> Step:
        return Step()


@dataclass
class AsyncPBT:
    """Population-based training: each member evolves at its own boundary; one in the bottom
    share copies a member of the top share of its label (ranked by latest fitness) and
    mutates, the others carry on."""

    exploit: AsyncExploit
    mutations: Mutations
    hp_config: HyperparameterConfig
    labels: Sequence[str] | None = None

    def pretrain(self, hps: Sequence[Mapping[str, Any]], rng: np.random.Generator
                 ) -> list[MutationPlan]:
        return _pretrain(self.mutations, self.hp_config, hps, rng)

    def due(self, waiting: Sequence[bool]) -> list[Group]:
        return [Group((m,)) for m, wait in enumerate(waiting) if wait]

    def plan(self, group: Group, fitness: Fitness, hps: Sequence[Mapping[str, Any]],
             rng: np.random.Generator) -> Step:
        (member,) = group.members
        peers = [m for m in range(len(hps))
                 if self.labels is None or self.labels[m] == self.labels[member]]
        source = self.exploit.decide(member, fitness.latest(peers), rng)
        if source is None:
            return Step()
        plan = _forced(self.mutations, self.hp_config, member, hps[source], rng)
        return Step(copies=((member, source),), mutations=(plan,),
                    lineage_copies=((member, source, plan),))


@dataclass
class MultipleFrequencies:
    """Multiple-frequencies PBT (:mod:`distmarl.hpo.multi_frequency`): a sub-population
    evolves once its members wait; losers clone winners and mutate, open slots take better
    members of other sub-populations (from a faster one the weights only: the slot then takes
    its sub-population elite's hyperparameters)."""

    frequencies: MultiFrequency
    mutations: Mutations
    hp_config: HyperparameterConfig

    def pretrain(self, hps: Sequence[Mapping[str, Any]], rng: np.random.Generator
                 ) -> list[MutationPlan]:
        return _pretrain(self.mutations, self.hp_config, hps, rng)

    def due(self, waiting: Sequence[bool]) -> list[Group]:
        return [Group(tuple(sub), k) for k, sub in enumerate(self.frequencies.subpopulations)
                if all(waiting[m] for m in sub)]

    def plan(self, group: Group, fitness: Fitness, hps: Sequence[Mapping[str, Any]],
             rng: np.random.Generator) -> Step:
        if group.subpopulation is None:
            raise ValueError(f"members {list(group.members)} are not a sub-population")
        step = self.frequencies.step_of(group.subpopulation, fitness.latest(), rng)
        plans = tuple(_forced(self.mutations, self.hp_config, m, hps[src], rng)
                      for m, src in step.clones)
        clones = tuple((m, src, p) for (m, src), p in zip(step.clones, plans))
        migrants = tuple((g.member, g.source, None) for g in step.migrations)
        return Step(
            copies=tuple(step.copies()), mutations=plans,
            hp_from=tuple((g.member, g.elite) for g in step.migrations if g.weights_only),
            lineage_copies=clones + migrants,
            events=tuple({"member": g.member, "migrated_from": g.source,
                          "weights_only": g.weights_only} for g in step.migrations))


def consecutive(sizes: Sequence[int]) -> list[list[int]]:
    """Members numbered through groups of ``sizes`` in order: ``[2, 3]`` -> ``[[0, 1], [2, 3, 4]]``."""
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out


def make_strategy(evo: EvolutionConfig, members: int, hp_config: HyperparameterConfig,
                  labels: Sequence[str] | None = None) -> EvolutionStrategy:
    """The strategy ``evo.mode`` names, for ``members`` members whose copies stay within
    ``labels`` (a league's sides, a mixed population's algorithms; None: all together)."""
    mutations = Mutations.from_config(evo.mutation)
    if evo.mode == "independent":
        return Independent()
    if evo.mode == "async":
        return AsyncPBT(AsyncExploit(evo.bottom_frac, evo.top_frac), mutations, hp_config, labels)
    if evo.mode == "multi_frequency":
        if labels is not None:  # the config refuses it: sub-populations would mix the labels
            raise ValueError("multi_frequency sub-populations cannot keep copies within "
                             f"groups of members ({sorted(set(labels))})")
        subs = consecutive([s.size for s in evo.subpopulations])
        return MultipleFrequencies(MultiFrequency(subs, evo.top_frac, evo.bottom_frac,
                                                  evo.migration_frac), mutations, hp_config)
    per_label = members if labels is None else min(labels.count(x) for x in set(labels))
    selection = TournamentSelection(evo.tournament.size, evo.tournament.elitism, per_label,
                                    evo.eval_loop)
    return Tournament(selection, mutations, hp_config, labels)
