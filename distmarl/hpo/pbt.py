"""Asynchronous evolution (population-based training's exploit step), decided in pure code.

A member that reaches its evolution step is ranked against the latest fitness of the others; if
it is in the bottom fraction it copies a member drawn from the top fraction (and then mutates:
explore), otherwise it carries on. No member waits for the slowest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from distmarl.hpo.tournament import rank


class AsyncExploit:
    """:param bottom_frac: share of members that copy; :param top_frac: share they copy from."""

    def __init__(self, bottom_frac: float = 0.25, top_frac: float = 0.25) -> None:
        for name, value in (("bottom_frac", bottom_frac), ("top_frac", top_frac)):
            if not 0.0 < value <= 0.5:
                raise ValueError(f"{name} must be in (0, 0.5], got {value}")
        self.bottom_frac = float(bottom_frac)
        self.top_frac = float(top_frac)

    def decide(self, member: int, latest_fitness: Mapping[int, float],
               rng: np.random.Generator) -> int | None:
        """The member to copy from, or None to carry on. Members without a fitness yet are
        left out of the ranking; ``member`` itself must have one."""
        if member not in latest_fitness:
            raise ValueError(f"member {member} has no fitness yet")
        ids = sorted(latest_fitness)
        if len(ids) < 2:
            return None
        order = [ids[i] for i in rank([latest_fitness[m] for m in ids])]  # best first
        n_top = max(1, math.ceil(self.top_frac * len(ids)))
        n_bottom = max(1, math.ceil(self.bottom_frac * len(ids)))
        if member not in order[-n_bottom:] or member in order[:n_top]:
            return None
        top = order[:n_top]
        return top[int(rng.integers(len(top)))]
