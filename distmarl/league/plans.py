"""The league's decisions, as pure code: who plays whom (prioritised fictitious self-play), the
record of results between players, and the bounded pool of frozen snapshots.

Players are string ids as in :mod:`distmarl.league.ratings` (``member/3``, ``snapshot/12``,
``ref/random``). Nothing here holds weights: the runtime keeps a snapshot's weights under its
id and carries out the plans made here.

**PFSP** (AlphaStar's prioritised fictitious self-play): a learner meets opponent ``o`` with a
weight ``f(P[learner beats o])``: ``hard`` ``(1 - p)^2`` puts the games where the learner loses;
``variance`` ``p (1 - p)`` where results are closest; ``uniform`` is plain fictitious self-play.
``P`` is the empirical win rate of the :class:`MatchRecord` (draws count half), pulled towards
0.5 by one pseudo-game so that an unplayed opponent is neither ignored nor certain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from distmarl.league.ratings import result_index

__all__ = ["Match", "MatchRecord", "Snapshot", "SnapshotPool", "choose_opponent", "pfsp_weights",
           "plan_matches"]

#: how PFSP weighs opponents (see :func:`pfsp_weights`)
Weighting = Literal["hard", "variance", "uniform"]


class MatchRecord:
    """Wins, draws and losses between every pair of players that met, from each side's view."""

    def __init__(self) -> None:
        #: (a, b) -> [a's wins, draws, a's losses] against b
        self.counts: dict[tuple[str, str], list[int]] = {}

    def record(self, a: str, b: str, result: float) -> None:
        """One match; ``result`` is ``a``'s (1 win, 0.5 draw, 0 loss)."""
        k = result_index(result)
        self.counts.setdefault((a, b), [0, 0, 0])[k] += 1
        self.counts.setdefault((b, a), [0, 0, 0])[2 - k] += 1

    def games(self, a: str, b: str) -> int:
        """Matches ``a`` and ``b`` played."""
        return sum(self.counts.get((a, b), (0, 0, 0)))

    def win_rate(self, a: str, b: str) -> float:
        """``a``'s score rate against ``b`` (draws half), with one pseudo-game at 0.5:
        ``(wins + draws / 2 + 0.5) / (games + 1)``; 0.5 before they have met."""
        w, d, lost = self.counts.get((a, b), (0, 0, 0))
        return (w + 0.5 * d + 0.5) / (w + d + lost + 1)

    def matrix(self, players: Sequence[str]) -> np.ndarray:
        """``(n, n)`` win rates of each row player against each column player (0.5 on the
        diagonal and where they have not met)."""
        return np.array([[0.5 if a == b else self.win_rate(a, b) for b in players]
                         for a in players])

    def forget(self, player: str) -> None:
        """Drop every result involving ``player`` (a snapshot that left the league)."""
        self.counts = {k: v for k, v in self.counts.items() if player not in k}

    def state_dict(self) -> dict[str, Any]:
        return {"counts": [[a, b, *v] for (a, b), v in self.counts.items()]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.counts = {(a, b): [int(w), int(d), int(lost)]
                       for a, b, w, d, lost in state["counts"]}


def pfsp_weights(win_rates: Sequence[float], weighting: Weighting = "hard") -> np.ndarray:
    """Sampling probabilities of opponents from the learner's win rates against them (see the
    module docstring); a uniform choice when every weight is zero."""
    p = np.clip(np.asarray(win_rates, dtype=np.float64), 0.0, 1.0)
    if p.size == 0:
        raise ValueError("no opponents to weigh")
    if weighting == "hard":
        w = (1.0 - p) ** 2
    elif weighting == "variance":
        w = p * (1.0 - p)
    elif weighting == "uniform":
        w = np.ones_like(p)
    else:
        raise ValueError(f"unknown PFSP weighting {weighting!r}; use hard, variance or uniform")
    total = w.sum()
    return w / total if total > 0 else np.full_like(p, 1.0 / p.size)


def choose_opponent(learner: str, current: Sequence[str], snapshots: Sequence[str],
                    record: MatchRecord, rng: np.random.Generator, current_share: float = 0.5,
                    weighting: Weighting = "hard", references: Sequence[str] = (),
                    reference_share: float = 0.0,
                    reference_weighting: Weighting | None = None,
                    self_share: float = 0.0) -> str:
    """One opponent for ``learner``: with probability ``reference_share`` one of the
    ``references``; otherwise with probability ``self_share`` the learner itself (a
    self-play game); otherwise with probability ``current_share`` (or when there are no
    snapshots) one of the ``current`` members, else a snapshot; within the chosen group by
    :func:`pfsp_weights` of ``learner``'s win rates (``reference_weighting`` among the
    references, None: ``weighting``). Past ``self_share``, ``learner`` itself is chosen only
    when it is the only candidate."""
    for name, share in (("current_share", current_share), ("reference_share", reference_share),
                        ("self_share", self_share)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {share}")
    others = [c for c in current if c != learner]
    how = weighting
    if references and reference_share > 0 and rng.random() < reference_share:
        pool = list(references)
        how = weighting if reference_weighting is None else reference_weighting
    elif self_share > 0 and rng.random() < self_share:
        return learner
    elif not snapshots or (others and rng.random() < current_share):
        pool = others or list(current)
    else:
        pool = list(snapshots)
    if not pool:
        raise ValueError(f"no opponent for {learner!r}: no other member and no snapshot")
    probs = pfsp_weights([record.win_rate(learner, o) for o in pool], how)
    return pool[int(rng.choice(len(pool), p=probs))]


@dataclass(frozen=True)
class Match:
    """One game's seating: side (a seat, in a symmetric game) -> the player taking it."""

    seats: dict[str, str]
    #: the side the learning member plays (its rows are the ones it learns from)
    learner_side: str


def plan_matches(learner: str, side: str, sides: Sequence[str],
                 current: Mapping[str, Sequence[str]], snapshots: Mapping[str, Sequence[str]],
                 record: MatchRecord,
                 rng: np.random.Generator, games: int, symmetric: bool = False,
                 current_share: float = 0.5, weighting: Weighting = "hard",
                 references: Mapping[str, Sequence[str]] | None = None,
                 reference_share: float = 0.0,
                 reference_weighting: Weighting | None = None,
                 self_share: float = 0.0) -> list[Match]:
    """Seatings of ``games`` games for ``learner``, a member of ``side``: every other side gets
    an opponent from that side's ``current`` members and ``snapshots``
    (:func:`choose_opponent`; ``references`` by side join with ``reference_share``, weighed
    among themselves by ``reference_weighting``). In a
    symmetric game the sides are seats sharing one population
    (``current`` and ``snapshots`` under ``side``), and the learner's seat turns with the
    game number, so it plays first and second equally often; ``self_share`` of the games
    not against a reference seat the learner in the other seat too (self-play: it learns
    from every seat). An asymmetric game's member holds one side's policies only, so it
    cannot play itself there."""
    if side not in sides:
        raise ValueError(f"{learner!r} plays for side {side!r}, which is not one of {list(sides)}")
    if self_share > 0 and not symmetric:
        raise ValueError(f"self_share {self_share} seats a learner against itself, which only "
                         "a symmetric game can (a member holds one side's policies)")
    matches = []
    for k in range(games):
        own = sides[k % len(sides)] if symmetric else side
        seats = {own: learner}
        for other in sides:
            if other != own:
                pool = side if symmetric else other
                seats[other] = choose_opponent(
                    learner, current[pool], snapshots.get(pool, ()), record, rng, current_share,
                    weighting, (references or {}).get(pool, ()), reference_share,
                    reference_weighting, self_share)
        matches.append(Match(seats, own))
    return matches


@dataclass(frozen=True)
class Snapshot:
    """A frozen copy of a member's policy: its id, whose it was and when it was taken."""

    id: str
    member: int
    generation: int


class SnapshotPool:
    """The league's past players, at most ``max_size``: the oldest leaves first (the newest
    are the strongest opponents a learner has not yet beaten; the oldest are the likeliest to
    be beaten by everyone, so PFSP would rarely pick them anyway)."""

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"the league holds at least one snapshot, got max_size={max_size}")
        self.max_size = max_size
        self.snapshots: list[Snapshot] = []
        self.taken = 0

    def add(self, member: int, generation: int) -> tuple[Snapshot, list[Snapshot]]:
        """Take a snapshot of ``member`` now; returns it and the snapshots that left to keep
        the pool within ``max_size`` (their weights, ratings and records can go)."""
        snap = Snapshot(f"snapshot/{self.taken}", member, generation)
        self.taken += 1
        self.snapshots.append(snap)
        gone = self.snapshots[:-self.max_size] if len(self.snapshots) > self.max_size else []
        self.snapshots = self.snapshots[len(gone):]
        return snap, gone

    def ids(self) -> list[str]:
        return [s.id for s in self.snapshots]

    def state_dict(self) -> dict[str, Any]:
        return {"max_size": self.max_size, "taken": self.taken,
                "snapshots": [[s.id, s.member, s.generation] for s in self.snapshots]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.max_size = int(state["max_size"])
        self.taken = int(state["taken"])
        self.snapshots = [Snapshot(str(i), int(m), int(g)) for i, m, g in state["snapshots"]]
