"""The game a run plays, as one hooks object the run calls for every game-dependent step.

A cooperative game (:class:`CooperativeHooks`) scores members by their episodes and plays no league;
a competitive or mixed one (:class:`~distmarl.runtime.hooks.league.LeagueHooks`) plans each worker's
matches, rates members by their games and keeps frozen snapshots. The run, generations and the
recorder call the same hooks either way (:class:`GameHooks`) and never ask which they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from distmarl.config import EvolutionConfig
from distmarl.hpo.tournament import rank
from distmarl.league.seating import LeaguePlan, MatchResult
from distmarl.runtime.fleets.protocol import Fleet
from distmarl.runtime.logic.run_state import FinalEvaluation

__all__ = ["CooperativeHooks", "Evaluated", "GameHooks"]


class Evaluated(NamedTuple):
    """An evaluation's ``fitness`` per member, and per member the episodes (a league: games)
    the env's step limit cut, under the evaluation's ``name``."""

    fitness: dict[int, float]
    capped: dict[int, int]
    name: str


class GameHooks(Protocol):
    """The run's hooks for what depends on the game."""

    def plan_collect(self, member: int) -> LeaguePlan | None:
        """The next matches of ``member``'s collect call (None: no league)."""

    def record_training(self, results: Sequence[MatchResult], capped: int) -> None:
        """A collect call's finished training games (``capped`` of them cut: draws)."""

    def evaluate(self, members: Sequence[int], seed: int) -> Evaluated:
        """``members``' fitness now, from evaluations seeded by ``seed`` (their weights
        published)."""

    def final(self, fitness: Sequence[float], episodes: int, seed: int
              ) -> tuple[FinalEvaluation, dict[int, int]]:
        """The final evaluation, its elite ranked by ``fitness``, and the cut episodes (or
        games) per member."""

    def after_generation(self, generation: int) -> None:
        """A generation ended (before its copies)."""

    def copied(self, copies: Sequence[tuple[int, int]]) -> None:
        """``(member, source)`` copies were carried out."""

    def progress(self) -> dict[str, Any]:
        """What the progress line shows besides the run's counters."""

    def summary(self) -> dict[str, Any]:
        """What the run's summary holds besides the run's counters."""

    def metrics(self) -> dict[str, float]:
        """Metrics besides the run's (namespaced keys)."""

    def plots(self, out: Path, fitness_history: Sequence[Sequence[float]]) -> list[Path]:
        """The game's plots written under ``out`` (the fitness plot first)."""

    def tables(self) -> dict[str, dict[str, list[Any]]]:
        """Tables for the tracking run at the end: artifact file -> column -> values."""

    def videos(self, elite: int, fitness: Sequence[float]
               ) -> dict[str, list[tuple[int | str, list[str] | None]]]:
        """The run's videos: file stem -> who plays in it, each a member index or a
        reference's name with the agents it plays (None: all it has); ``"elite"`` first, the
        one recorded during the run too. ``elite``: the run's elite, ``fitness``: each
        member's latest."""

    def state_dict(self) -> dict[str, Any]:
        """Plain state for a checkpoint's meta (merged into it)."""

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        """Frozen snapshots' weights by id, for a checkpoint."""

    def load_state_dict(self, meta: dict[str, Any], snapshots: dict[str, dict[str, Any]]
                        ) -> None:
        """Restore from a checkpoint's meta and snapshots."""


class CooperativeHooks:
    """A cooperative game: fitness is a member's mean score over ``evo.eval_episodes``
    episodes (its policy acting as ``evo.eval_explore`` says), the final evaluation scores
    every member and random play on the same fixed episodes; no league."""

    def __init__(self, fleet: Fleet, evo: EvolutionConfig) -> None:
        self.fleet, self.evo = fleet, evo

    def plan_collect(self, member: int) -> LeaguePlan | None:
        return None

    def record_training(self, results: Sequence[MatchResult], capped: int) -> None:
        """No games to rate."""

    def evaluate(self, members: Sequence[int], seed: int) -> Evaluated:
        evo = self.evo
        results = self.fleet.evaluate(members, evo.eval_episodes, evo.eval_steps, seed,
                                      evo.eval_explore)
        return Evaluated({i: float(np.mean(r)) for i, r in zip(members, results)},
                         {i: r.capped for i, r in zip(members, results)}, "fitness")

    def final(self, fitness: Sequence[float], episodes: int, seed: int
              ) -> tuple[FinalEvaluation, dict[int, int]]:
        members = list(range(len(fitness)))
        scores, random = self.fleet.score_fixed(members, episodes, seed, self.evo.eval_explore)
        final = FinalEvaluation(
            episodes=episodes, seed=seed, elite=rank(fitness)[0],
            scores=[float(np.mean(s)) for s in scores],
            stderr=[float(np.std(s) / np.sqrt(len(s))) for s in scores],
            random_score=float(np.mean(random)))
        return final, {i: s.capped for i, s in enumerate(scores)}

    def after_generation(self, generation: int) -> None:
        """No snapshots to take."""

    def copied(self, copies: Sequence[tuple[int, int]]) -> None:
        """Nothing follows a member's copy."""

    def progress(self) -> dict[str, Any]:
        return {}

    def summary(self) -> dict[str, Any]:
        return {}

    def metrics(self) -> dict[str, float]:
        return {}

    def tables(self) -> dict[str, dict[str, list[Any]]]:
        return {}

    def videos(self, elite: int, fitness: Sequence[float]
               ) -> dict[str, list[tuple[int | str, list[str] | None]]]:
        return {"elite": [(elite, None)]}

    def plots(self, out: Path, fitness_history: Sequence[Sequence[float]]) -> list[Path]:
        from distmarl.tracking.plots import plot_fitness

        return [plot_fitness([list(r) for r in fitness_history], out / "fitness.png")]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        return {}

    def load_state_dict(self, meta: dict[str, Any], snapshots: dict[str, dict[str, Any]]
                        ) -> None:
        """Nothing to restore (a league's checkpoint is refused before the run starts)."""
