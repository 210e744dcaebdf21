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

A training game's opponent comes from one of its sources (:class:`OpponentSource`: the current
members, their snapshots, the references), drawn by their shares; PFSP weighs the players
within the source drawn, as that source's weighting says (:func:`choose_opponent`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from distmarl.league.ratings import result_index

__all__ = ["DEFAULT_OPPONENTS", "Match", "MatchRecord", "OpponentSource", "Snapshot",
           "SnapshotPool", "check_sources", "choose_opponent", "pfsp_weights", "plan_matches"]

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


#: where a training game's opponent comes from: the current members of the side it plays, their
#: frozen snapshots, or the references
Source = Literal["current", "snapshot", "reference"]

#: the sources in the order a game's source is drawn (one uniform number per source passed), so
#: the draws do not depend on the order a config lists them in
SOURCES: tuple[Source, ...] = ("reference", "current", "snapshot")

WEIGHTINGS: tuple[Weighting, ...] = ("hard", "variance", "uniform")

#: how far the shares of a list of sources may sum from 1
SHARE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class OpponentSource:
    """One source of training opponents: the ``share`` of a learner's training games it takes,
    and how PFSP weighs its players among themselves (:func:`pfsp_weights`)."""

    source: Source
    share: float
    weighting: Weighting = "hard"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown opponent source {self.source!r}; use one of "
                             f"{list(SOURCES)}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"the {self.source} share must be within [0, 1], got {self.share}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"unknown PFSP weighting {self.weighting!r} for the {self.source} "
                             "source; use hard, variance or uniform")


#: half the games against the current members, half against snapshots (the references are
#: evaluation opponents only)
DEFAULT_OPPONENTS: tuple[OpponentSource, ...] = (OpponentSource("current", 0.5),
                                                 OpponentSource("snapshot", 0.5))


def check_sources(sources: Sequence[OpponentSource]) -> dict[Source, OpponentSource]:
    """``sources`` by name; ValueError when one is listed twice or the shares do not sum to 1
    (within :data:`SHARE_TOLERANCE`)."""
    by_name: dict[Source, OpponentSource] = {}
    for s in sources:
        if s.source in by_name:
            raise ValueError(f"opponent source {s.source!r} is listed twice")
        by_name[s.source] = s
    total = sum(s.share for s in sources)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"the opponent sources' shares sum to {total:g}, not 1")
    return by_name


def _draw(shares: Mapping[Source, float], rng: np.random.Generator) -> Source:
    """A source with probability proportional to its share, in :data:`SOURCES` order: each
    source with a share, but the last, draws one number and is taken with its share of what
    is left."""
    order = [s for s in SOURCES if shares.get(s, 0.0) > 0.0]
    for i, s in enumerate(order[:-1]):
        if rng.random() < shares[s] / sum(shares[t] for t in order[i:]):
            return s
    return order[-1]


def _choose(learner: str, pools: Mapping[str, Sequence[str]],
            sources: Mapping[Source, OpponentSource], record: MatchRecord,
            rng: np.random.Generator) -> str:
    """:func:`choose_opponent` on checked ``sources`` (by name)."""
    players: dict[Source, list[str]] = {
        "reference": list(pools.get("reference", ())),
        "current": [p for p in pools.get("current", ()) if p != learner],
        "snapshot": list(pools.get("snapshot", ())),
    }
    shares: dict[Source, float] = {}
    weighting: dict[Source, Weighting] = {}
    for name, s in sources.items():
        to = name
        if name == "reference" and not players["reference"]:
            continue  # a side without references: the others share its games
        if name == "snapshot" and not players["snapshot"]:
            to = "current"  # no snapshot taken yet
        elif name == "current" and not players["current"] and players["snapshot"]:
            to = "snapshot"  # no other member
        shares[to] = shares.get(to, 0.0) + s.share
        if to == name:
            weighting[to] = s.weighting
        elif to not in sources:
            weighting.setdefault(to, s.weighting)
    drawn = _draw(shares, rng) if any(v > 0.0 for v in shares.values()) else "current"
    pool = players[drawn]
    if not pool:  # no other member and no snapshot: the learner plays itself
        pool = list(pools.get("current", ()))
    if not pool:
        raise ValueError(f"no opponent for {learner!r}: no other member and no snapshot")
    probs = pfsp_weights([record.win_rate(learner, o) for o in pool],
                         weighting.get(drawn, "hard"))
    return pool[int(rng.choice(len(pool), p=probs))]


def choose_opponent(learner: str, pools: Mapping[str, Sequence[str]],
                    sources: Sequence[OpponentSource], record: MatchRecord,
                    rng: np.random.Generator) -> str:
    """One opponent for ``learner`` from ``pools`` (source name -> its players; ``current``
    may hold the learner, who is left out): a source drawn by share, then one of its players by
    :func:`pfsp_weights` of ``learner``'s win rates against them, weighed as that source says.

    A source with no player takes no games: a ``reference`` source whose side has no
    reference leaves its share to the other sources (in proportion to theirs); a ``snapshot``
    source before the first snapshot passes its games to the current members, and a
    ``current`` source, when the learner has no other member beside it, to the snapshots
    (weighed as the source they land on is listed, or as the source that passed them when it
    is not); with neither, the learner plays itself."""
    return _choose(learner, pools, check_sources(sources), record, rng)


@dataclass(frozen=True)
class Match:
    """One game's seating: side (a seat, in a symmetric game) -> the player taking it."""

    seats: dict[str, str]
    #: the side the learning member plays (its rows are the ones it learns from)
    learner_side: str


def plan_matches(learner: str, side: str, sides: Sequence[str],
                 pools: Mapping[str, Mapping[str, Sequence[str]]], record: MatchRecord,
                 rng: np.random.Generator, games: int, *, symmetric: bool = False,
                 sources: Sequence[OpponentSource] = DEFAULT_OPPONENTS) -> list[Match]:
    """Seatings of ``games`` games for ``learner``, a member of ``side``: every other side gets
    an opponent from that side's ``pools`` (side -> source name -> its players; see
    :func:`choose_opponent`) drawn by ``sources``. In a symmetric game the sides are seats
    sharing one population (its players under ``side``), and the learner's seat turns with
    the game number, so it plays first and second equally often."""
    if side not in sides:
        raise ValueError(f"{learner!r} plays for side {side!r}, which is not one of {list(sides)}")
    by_name = check_sources(sources)
    matches = []
    for k in range(games):
        own = sides[k % len(sides)] if symmetric else side
        seats = {own: learner}
        for other in sides:
            if other != own:
                seats[other] = _choose(learner, pools.get(side if symmetric else other, {}),
                                       by_name, record, rng)
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
