"""A league run's final evaluation, as pure code: which games are played and what they say.

A rating says how players compare within the league; a user wants to know how the trained
policies play against opponents they understand. At the end of a league run:

* every member plays every reference of the other side(s) (``games`` games each; in a
  symmetric game it takes each seat for half of them): its final score, as a cooperative run's
  members are all scored on the same episodes;
* in an asymmetric game each side's elite plays the other sides' elites;
* uniformly random play on each side plays the same references (the baseline: "the
  predators' elite catches the fleeing prey more often than random predators do").

Games against one opponent are seeded by that opponent alone (``seed + 7919 * k``, ``k`` its
place among the side's opponents), so every member meets the same games and
``distmarl evaluate`` on a checkpoint plays them again. Results are the learner's (1 win,
0.5 draw, 0 loss; a game the env's step limit cut is a draw); :func:`outcome` turns them into
rates, and each row counts its games that were cut (``capped``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distmarl.league.state import League, member_id

__all__ = ["RANDOM", "FinalPairing", "final_games", "final_rows", "member_games", "outcome",
           "pooled", "rows_of"]

#: the baseline player: uniformly random legal play, on any side
RANDOM = "ref/random"


@dataclass(frozen=True)
class FinalPairing:
    """Games of ``learner`` (on ``side``; None: every seat in turn) against ``opponent`` (on
    ``opponent_side``), seeded by ``seed``; ``kind`` is ``member``, ``elites`` or
    ``baseline``."""

    learner: str
    side: str | None
    opponent: str
    opponent_side: str
    seed: int
    kind: str


def _opponent_sides(league: League, side: str) -> list[str]:
    """The sides ``side``'s players meet (symmetric: the one pool, under the first seat)."""
    sides = league.settings.sides
    return [sides[0]] if league.settings.symmetric else [s for s in sides if s != side]


def _references(league: League, side: str, seed: int) -> list[tuple[str, str, int]]:
    """``(reference, its side, seed)`` of every reference ``side`` meets, in a fixed order."""
    refs = [(f"ref/{name}", other) for other in _opponent_sides(league, side)
            for name in sorted(league.references.get(other, []))]
    return [(ref, other, seed + 7919 * k) for k, (ref, other) in enumerate(refs)]


def member_games(league: League, member: int, seed: int) -> list[FinalPairing]:
    """``member``'s final games: every reference of the sides it meets."""
    side = league.side_of_member[member]
    own = None if league.settings.symmetric else side
    return [FinalPairing(member_id(member), own, ref, ref_side, s, "member")
            for ref, ref_side, s in _references(league, side, seed)]


def final_games(league: League, elites: Mapping[str, int], seed: int) -> list[FinalPairing]:
    """Every game of the final evaluation (see the module docstring); ``elites``: side ->
    its elite member (one entry, the first seat's, in a symmetric game)."""
    games = [g for i in range(len(league.side_of_member)) for g in member_games(league, i, seed)]
    if not league.settings.symmetric:
        sides = list(elites)
        for k, a in enumerate(sides):
            for b in sides[k + 1:]:
                games.append(FinalPairing(member_id(elites[a]), a, member_id(elites[b]), b,
                                          seed + 31337 * (k + 1), "elites"))
    for side in elites:
        own = None if league.settings.symmetric else side
        games += [FinalPairing(RANDOM, own, ref, ref_side, s, "baseline")
                  for ref, ref_side, s in _references(league, side, seed)]
    return games


def outcome(results: Sequence[float]) -> dict[str, float]:
    """Games, win / draw / loss rates, the score rate (draws half) and its standard error."""
    r = np.asarray(results, dtype=np.float64)
    if r.size == 0:
        raise ValueError("no games to summarise")
    return {"games": float(r.size), "win": float(np.mean(r == 1.0)),
            "draw": float(np.mean(r == 0.5)), "loss": float(np.mean(r == 0.0)),
            "score": float(r.mean()), "score_stderr": float(r.std() / np.sqrt(r.size))}


def final_rows(games: Sequence[FinalPairing], results: Sequence[Sequence[float]],
               capped: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """One row per game set: who played whom, on which side, :func:`outcome`, and
    ``capped``: its games the step limit cut (``capped[k]`` for set ``k``; None: none)."""
    if len(games) != len(results):
        raise ValueError(f"{len(games)} game sets but {len(results)} results")
    cut = [0] * len(games) if capped is None else [int(c) for c in capped]
    if len(cut) != len(games):
        raise ValueError(f"{len(games)} game sets but {len(cut)} capped counts")
    return [{"player": g.learner, "side": g.side, "opponent": g.opponent, "kind": g.kind,
             **outcome(r), "capped": c} for g, r, c in zip(games, results, cut)]


def pooled(rows: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """The score rate over ``rows`` (weighted by their games) and its standard error: a
    player's final score against all the references it met."""
    if not rows:
        raise ValueError("no final games to pool")
    n = sum(r["games"] for r in rows)
    mean = sum(r["score"] * r["games"] for r in rows) / n
    square = sum((r["win"] + 0.25 * r["draw"]) * r["games"] for r in rows) / n
    return float(mean), float(np.sqrt(max(square - mean**2, 0.0) / n))


def rows_of(rows: Sequence[Mapping[str, Any]], player: str, kind: str = "member",
            side: str | None = None) -> list[Mapping[str, Any]]:
    """``player``'s rows of ``kind`` (and, given, on ``side``)."""
    return [r for r in rows if r["player"] == player and r["kind"] == kind
            and (side is None or r["side"] in (None, side))]
