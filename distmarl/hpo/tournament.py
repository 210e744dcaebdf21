"""Tournament selection as a pure plan: which member each member of the next generation copies.

The population is a fixed set of members (one learner each). Copying weights is the expensive
act, so the plan leaves the elite where it is (it passes unchanged and is listed first in
``order``) and every other member takes the winner of a tournament; a member whose winner is
itself needs no copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def mean_fitness(history: Sequence[float], eval_loop: int) -> float:
    """Mean of the last ``eval_loop`` evaluations; ``-inf`` for a member never evaluated."""
    if len(history) == 0:
        return float("-inf")
    return float(np.mean(history[-eval_loop:]))


def rank(fitness: Sequence[float]) -> list[int]:
    """Member indices best first; ties go to the lower index (a deterministic order)."""
    return sorted(range(len(fitness)), key=lambda i: (-fitness[i], i))


@dataclass(frozen=True)
class SelectionPlan:
    """``sources[m]`` is the member whose full state member ``m`` takes next generation.

    ``elite`` stays unchanged (None without elitism); ``order`` lists the members with the elite
    first, the order in which AgileRL's population would hold them.
    """

    sources: tuple[int, ...]
    elite: int | None
    fitness: tuple[float, ...]
    order: tuple[int, ...] = field(default=())
    #: every side's elite in a league (sides in order); ``(elite,)`` otherwise
    elites: tuple[int, ...] = field(default=())

    def copies(self) -> list[tuple[int, int]]:
        """``(member, source)`` pairs that need a weight copy (source != member)."""
        return [(member, src) for member, src in enumerate(self.sources) if src != member]


class TournamentSelection:
    """AgileRL's tournament selection with elitism, deciding only (no weights touched).

    :param tournament_size: members drawn (without replacement) per tournament.
    :param elitism: keep the best member unchanged.
    :param population_size: number of members.
    :param eval_loop: how many of each member's latest evaluations make its fitness.
    """

    def __init__(self, tournament_size: int, elitism: bool, population_size: int,
                 eval_loop: int) -> None:
        if population_size < 1:
            raise ValueError(f"population_size must be >= 1, got {population_size}")
        if not 1 <= tournament_size <= population_size:
            raise ValueError(f"tournament_size must be in [1, population_size={population_size}], "
                             f"got {tournament_size}")
        if eval_loop < 1:
            raise ValueError(f"eval_loop must be >= 1, got {eval_loop}")
        self.tournament_size = int(tournament_size)
        self.elitism = bool(elitism)
        self.population_size = int(population_size)
        self.eval_loop = int(eval_loop)

    def fitness(self, histories: Sequence[Sequence[float]]) -> list[float]:
        return [mean_fitness(h, self.eval_loop) for h in histories]

    def tournament(self, fitness: Sequence[float], rng: np.random.Generator) -> int:
        """The best of ``tournament_size`` members drawn at random."""
        entrants = rng.choice(len(fitness), size=self.tournament_size, replace=False)
        return int(min(entrants.tolist(), key=lambda i: (-fitness[i], i)))

    def select(self, histories: Sequence[Sequence[float]], rng: np.random.Generator) -> SelectionPlan:
        """Plan the next generation from each member's evaluation history."""
        if len(histories) != self.population_size:
            raise ValueError(f"expected fitness histories of {self.population_size} members, "
                             f"got {len(histories)}")
        fitness = self.fitness(histories)
        elite = rank(fitness)[0] if self.elitism else None
        sources = [
            member if member == elite else self.tournament(fitness, rng)
            for member in range(self.population_size)
        ]
        order = ([elite] if elite is not None else []) + [s for s in range(self.population_size)
                                                          if s != elite]
        return SelectionPlan(tuple(sources), elite, tuple(fitness), tuple(order),
                             () if elite is None else (elite,))


def select_by_side(selection: TournamentSelection, histories: Sequence[Sequence[float]],
                   side_of_member: Sequence[str], rng: np.random.Generator) -> SelectionPlan:
    """Tournaments within each group of members (``selection``'s settings; a group may be of
    any size of at least the tournament's): a member only ever copies a member of its own
    group. A league's groups are its sides (a rating is earned against one side's opponents);
    a mixed population's its algorithms (a state loads only into its own algorithm). The
    plan's ``elite`` is the first group's, ``elites`` every group's."""
    if len(histories) != len(side_of_member):
        raise ValueError(f"{len(histories)} fitness histories for {len(side_of_member)} members")
    sides = list(dict.fromkeys(side_of_member))
    sources = list(range(len(histories)))
    fitness = selection.fitness(histories)
    elites: list[int] = []
    for side in sides:
        members = [i for i, s in enumerate(side_of_member) if s == side]
        group = TournamentSelection(selection.tournament_size, selection.elitism, len(members),
                                    selection.eval_loop)
        plan = group.select([histories[i] for i in members], rng)
        for position, src in enumerate(plan.sources):  # positions within the side
            sources[members[position]] = members[src]
        if plan.elite is not None:
            elites.append(members[plan.elite])
    order = elites + [i for i in range(len(histories)) if i not in elites]
    return SelectionPlan(tuple(sources), elites[0] if elites else None, tuple(fitness),
                         tuple(order), tuple(elites))
