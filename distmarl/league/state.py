"""The league of a competitive run, as pure state: its players, ratings, results and snapshots.

Players: each side's current members (``member/<i>``), frozen snapshots of them
(``snapshot/<k>``, at most ``max_snapshots`` per league), and references (``ref/<name>``).
Uniformly random play (``ref/random``; the first reference by name when it is not one) is the
anchor: its rating never moves, so a rating always means the same distance from random play.
The other references are rated like any player (a fixed minimax at random's rating would
pull every member that loses to it down towards random's level). The coordinator asks it what to do and tells it what
happened; the runtime keeps the snapshots' weights under their ids.

Usage (the coordinator's loop)::

    league = League(sides_of_members, references, LeagueSettings(...))
    plans = league.training_matches(member, rng, games)     # seatings for a rollout worker
    league.record_training(results)                         # PFSP win rates
    pairs = league.evaluation_opponents(member)             # references and rival members
    league.record_evaluation(results)                       # ratings
    fitness = league.fitness(member)                        # its rating (ordinal)
    new, gone = league.snapshot(generation)                 # every snapshot_every generations
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distmarl.league.plans import (
    DEFAULT_OPPONENTS,
    Match,
    MatchRecord,
    OpponentSource,
    Snapshot,
    SnapshotPool,
    check_sources,
    plan_matches,
)
from distmarl.league.ratings import Ratings

__all__ = ["League", "LeagueSettings", "member_id"]


def member_id(member: int) -> str:
    """A member's player id."""
    return f"member/{member}"


@dataclass(frozen=True)
class LeagueSettings:
    """The ``league`` config section's decisions (plain data)."""

    sides: tuple[str, ...]
    symmetric: bool
    snapshot_every: int = 2
    max_snapshots: int = 8
    #: where training opponents come from, each source's share of the games and weighting
    opponents: tuple[OpponentSource, ...] = DEFAULT_OPPONENTS

    def __post_init__(self) -> None:
        check_sources(self.opponents)


class League:
    """See the module docstring. ``side_of_member[i]`` is member ``i``'s side (in a symmetric
    game every member's is the first seat: it takes every seat in turn); ``references``: side
    -> the reference names that play it."""

    def __init__(self, side_of_member: Sequence[str], references: Mapping[str, Sequence[str]],
                 settings: LeagueSettings) -> None:
        self.settings = settings
        self.side_of_member = list(side_of_member)
        self.references = {s: list(refs) for s, refs in references.items()}
        ref_ids = {f"ref/{r}" for refs in self.references.values() for r in refs}
        #: the player whose rating never moves: it fixes the scale (see the module docstring)
        self.anchor = "ref/random" if "ref/random" in ref_ids or not ref_ids else min(ref_ids)
        self.ratings = Ratings(fixed=[self.anchor])
        for i in range(len(self.side_of_member)):
            self.ratings.add(member_id(i))
        for r in sorted(ref_ids):
            self.ratings.add(r)
        self.record = MatchRecord()
        self.pool = SnapshotPool(settings.max_snapshots)
        #: snapshot id -> the side it plays
        self.snapshot_side: dict[str, str] = {}

    def _pool_of(self, side: str) -> str:
        """The side whose players fill ``side``'s seats (symmetric: one pool, the first)."""
        return self.settings.sides[0] if self.settings.symmetric else side

    def current(self, side: str) -> list[str]:
        """The current members playing ``side``."""
        pool = self._pool_of(side)
        return [member_id(i) for i, s in enumerate(self.side_of_member) if s == pool]

    def snapshots(self, side: str) -> list[str]:
        pool = self._pool_of(side)
        return [s.id for s in self.pool.snapshots if self.snapshot_side[s.id] == pool]

    def training_matches(self, member: int, rng: np.random.Generator, games: int
                         ) -> list[Match]:
        """Seatings of ``games`` training games for ``member`` (PFSP opponents; see
        :func:`~distmarl.league.plans.plan_matches`)."""
        sides = self.settings.sides
        pools = {s: {"current": self.current(s), "snapshot": self.snapshots(s),
                     "reference": [f"ref/{r}" for r in self.references.get(s, [])]}
                 for s in sides}
        return plan_matches(member_id(member), self.side_of_member[member], sides, pools,
                            self.record, rng, games, symmetric=self.settings.symmetric,
                            sources=self.settings.opponents)

    def evaluation_opponents(self, member: int) -> dict[str, list[str]]:
        """Opponent side -> whom ``member`` plays in its evaluation: every reference of that
        side and every current member of it (others than itself)."""
        own = self.side_of_member[member]
        out: dict[str, list[str]] = {}
        for side in self.settings.sides:
            if side == own and not self.settings.symmetric:
                continue
            refs = [f"ref/{r}" for r in self.references.get(side, [])]
            rivals = [p for p in self.current(side) if p != member_id(member)]
            out[side] = refs + rivals
        if self.settings.symmetric:  # one pool: the seats' lists are the same; keep one
            first = self.settings.sides[0]
            out = {first: out[first]}
        return out

    def record_training(self, results: Iterable[tuple[str, str, float]]) -> None:
        """Training games' results: the win rates PFSP weighs opponents by."""
        for a, b, r in results:
            self.record.record(a, b, r)

    def record_evaluation(self, results: Iterable[tuple[str, str, float]]) -> None:
        """Evaluation games' results, in order: ratings and win rates."""
        for a, b, r in results:
            self.ratings.record(a, b, r)
            self.record.record(a, b, r)

    def fitness(self, member: int) -> float:
        """``member``'s rating (OpenSkill ordinal): its fitness within its side."""
        return self.ratings.ordinal(member_id(member))

    def copied(self, member: int, source: int) -> None:
        """``member`` took ``source``'s weights: it takes its rating too."""
        self.ratings.set_like(member_id(member), member_id(source))

    def snapshot_due(self, generation: int) -> bool:
        return generation > 0 and generation % self.settings.snapshot_every == 0

    def snapshot(self, generation: int) -> tuple[list[Snapshot], list[Snapshot]]:
        """Every member joins the league frozen (rated where it stands); returns the new
        snapshots and those that left the bounded pool (their weights, ratings and results
        go)."""
        new, gone = [], []
        for i, side in enumerate(self.side_of_member):
            snap, left = self.pool.add(i, generation)
            self.snapshot_side[snap.id] = side
            self.ratings.add(snap.id, like=member_id(i))
            new.append(snap)
            gone += left
        for s in gone:
            if s in new:
                new.remove(s)
            self.snapshot_side.pop(s.id, None)
            self.ratings.remove(s.id)
            self.record.forget(s.id)
        return new, gone

    def state_dict(self) -> dict[str, Any]:
        return {"ratings": self.ratings.state_dict(), "record": self.record.state_dict(),
                "pool": self.pool.state_dict(), "snapshot_side": dict(self.snapshot_side)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.ratings.load_state_dict(state["ratings"])
        self.record.load_state_dict(state["record"])
        self.pool.load_state_dict(state["pool"])
        self.snapshot_side = {str(k): str(v) for k, v in state["snapshot_side"].items()}
