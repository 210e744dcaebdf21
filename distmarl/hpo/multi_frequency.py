"""Multiple-frequencies PBT (Doulazmi et al. 2025) as pure plans: which member copies which.

The population is split into sub-populations, fastest first, each evolving every its own
``evo_steps``: a short horizon greedily chases what pays off soon, a long one keeps schedules
that pay off late, and keeping several alive stops the population collapsing onto the short
horizon's choice. A sub-population evolves when its own members reach their boundary (no
barrier across sub-populations). Its members, ranked by their latest fitness, fall into four
brackets, best first: *winners*, *survivors*, *open for migration* and *losers*:

* every loser becomes a clone of a winner (drawn at random), and only those clones mutate;
* every open slot takes a member of another sub-population whose latest fitness beats the
  slot's, best first and each at most once: from a *faster* sub-population only the weights
  migrate (the slot keeps its own elite's hyperparameters, so a long horizon never inherits a
  schedule tuned for a short one); from a slower one the member is cloned in full;
* winners and survivors stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Migration:
    """``member`` takes ``source``'s state; ``weights_only``: it keeps the hyperparameters of
    its sub-population's elite ``elite`` (a migrant from a faster sub-population)."""

    member: int
    source: int
    weights_only: bool
    elite: int


@dataclass(frozen=True)
class SubpopulationStep:
    """One sub-population's evolution step: ``clones`` (loser, winner) pairs, whose losers
    then mutate, and ``migrations`` into its open slots."""

    subpopulation: int
    clones: tuple[tuple[int, int], ...]
    migrations: tuple[Migration, ...]

    def copies(self) -> list[tuple[int, int]]:
        """Every ``(member, source)`` state copy of the step."""
        return [*self.clones, *((m.member, m.source) for m in self.migrations)]


def brackets(size: int, top_frac: float, bottom_frac: float, migration_frac: float
             ) -> tuple[int, int, int]:
    """``(winners, open for migration, losers)`` of a sub-population of ``size``: each share
    rounded, at least one winner and (from two members on) one loser, never more than the
    members there are (winners first, then losers, then open slots)."""
    if size < 2:
        return size, 0, 0
    winners = min(size - 1, max(1, round(top_frac * size)))
    losers = min(size - winners, max(1, round(bottom_frac * size)))
    migrate = min(size - winners - losers, round(migration_frac * size))
    return winners, migrate, losers


class MultiFrequency:
    """Plans of MF-PBT's steps (module docstring).

    :param subpopulations: each sub-population's members, fastest first.
    :param top_frac: share of winners; ``bottom_frac``: of losers; ``migration_frac``: of
        slots open for migration, just above the losers.
    """

    def __init__(self, subpopulations: Sequence[Sequence[int]], top_frac: float,
                 bottom_frac: float, migration_frac: float) -> None:
        members = [m for sub in subpopulations for m in sub]
        if len(set(members)) != len(members):
            raise ValueError(f"a member is in two sub-populations: {list(subpopulations)}")
        self.subpopulations = [list(sub) for sub in subpopulations]
        self.top_frac, self.bottom_frac = float(top_frac), float(bottom_frac)
        self.migration_frac = float(migration_frac)
        self.of_member = {m: k for k, sub in enumerate(self.subpopulations) for m in sub}

    def step_of(self, sub: int, fitness: Mapping[int, float], rng: np.random.Generator
                ) -> SubpopulationStep:
        """Sub-population ``sub``'s step from every member's latest ``fitness`` (members of
        other sub-populations without one yet cannot migrate)."""
        own = sorted(self.subpopulations[sub], key=lambda m: (-fitness[m], m))
        n_win, n_open, n_lose = brackets(len(own), self.top_frac, self.bottom_frac,
                                         self.migration_frac)
        winners = own[:n_win]
        losers = own[len(own) - n_lose:]
        open_slots = own[len(own) - n_lose - n_open:len(own) - n_lose]
        clones = tuple((m, winners[int(rng.integers(len(winners)))]) for m in losers)
        foreign = sorted((m for m, k in self.of_member.items() if k != sub and m in fitness),
                         key=lambda m: (-fitness[m], m))
        migrations = []
        for slot in open_slots:
            better = [m for m in foreign if fitness[m] > fitness[slot]]
            if not better:
                break  # slots are ranked: a worse one would find no better candidate either
            source = better[0]
            foreign.remove(source)
            migrations.append(Migration(slot, source, self.of_member[source] < sub, own[0]))
        return SubpopulationStep(sub, clones, tuple(migrations))
