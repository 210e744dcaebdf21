"""Who acts in the collector's seats: the learner in all of them, or (a league) opponents in
some (:class:`~distmarl.league.seating.Seating`).

The collector asks its seat plan, every step, for the actions to send (opponents' for their
seats), which rows are the learner's own (only those train it), and which games ended. Without
a league the learner holds every seat (:class:`LearnerEverywhere`): its actions go as they are,
every row is its own and no game is played.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

__all__ = ["LearnerEverywhere", "MatchResult", "SeatPlan"]

#: a league game that ended: (learner, opponent, the learner's result: 1 win, 0.5 draw, 0 loss)
MatchResult = tuple[str, str, float]


class SeatPlan(Protocol):
    """Who holds which seat of the collector's sub-envs."""

    def learner_rows(self, agents: list[str]) -> dict[str, np.ndarray] | None:
        """Per agent, ``(num_envs,)`` True where the learner holds the seat; None: all."""

    def override(self, actions: dict[str, np.ndarray], obs: Mapping[str, Any], explore: bool
                 ) -> dict[str, np.ndarray]:
        """``actions`` (the learner's, per agent) with the opponents' in their seats."""

    def step(self, rew: Mapping[str, Any], ended: np.ndarray, capped: np.ndarray | None = None
             ) -> list[MatchResult]:
        """One vectorised step happened: the games that ended (``ended``: ``(num_envs,)``;
        ``capped``: cut by the step limit, a draw)."""


class LearnerEverywhere:
    """The learner holds every seat (no league)."""

    def learner_rows(self, agents: list[str]) -> dict[str, np.ndarray] | None:
        return None

    def override(self, actions: dict[str, np.ndarray], obs: Mapping[str, Any], explore: bool
                 ) -> dict[str, np.ndarray]:
        return actions

    def step(self, rew: Mapping[str, Any], ended: np.ndarray, capped: np.ndarray | None = None
             ) -> list[MatchResult]:
        return []
