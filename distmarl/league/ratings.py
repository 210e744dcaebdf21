"""Ratings of the players of a league (members, their frozen snapshots, references) from
the results of two-player matches, through OpenSkill.

Why OpenSkill's Bradley-Terry model rather than Elo: a rating carries its uncertainty
(``sigma``), so a snapshot that has played a handful of games is not ranked as confidently as a
member that has played hundreds, and fitness can be the conservative ``ordinal``
(``mu - 3 sigma``, TrueSkill's leaderboard figure); draws (tictactoe's common result) are
first-class; and the library is small, maintained and pure Python. Elo's single number has
neither, and its K-factor would be one more setting to tune.

A player is a string id (``member/3``, ``snapshot/12``, ``ref/random``). A **fixed** player's
rating never moves (an anchor fixes the scale: a league fixes ``ref/random``, so beating it
always means the same thing); its opponent's rating moves as if it were not fixed. Results are
applied one match at a time, in order, so a known sequence of results gives known ratings.

Usage::

    r = Ratings(fixed=["ref/random"])
    r.record("member/0", "ref/random", 1.0)   # 1 win, 0.5 draw, 0 loss for the first player
    r.ordinal("member/0"), r.win_probability("member/0", "member/1")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openskill.models import BradleyTerryFull

__all__ = ["RESULTS", "Ratings", "result_index"]

#: a match result for the first player: win, draw, loss
RESULTS = (1.0, 0.5, 0.0)


def result_index(result: float) -> int:
    """``result``'s place in :data:`RESULTS` (0 win, 1 draw, 2 loss); ValueError for anything
    else."""
    if result not in RESULTS:
        raise ValueError(f"a match result is 1 (win), 0.5 (draw) or 0 (loss), got {result!r}")
    return RESULTS.index(result)


class Ratings:
    """OpenSkill ratings by player id; see the module docstring. Plain data in and out
    (:meth:`state_dict`), so a checkpoint or a copy carries them."""

    def __init__(self, fixed: Iterable[str] = ()) -> None:
        self.model = BradleyTerryFull()
        #: player id -> (mu, sigma)
        self.table: dict[str, tuple[float, float]] = {}
        self.fixed = set(fixed)
        #: matches applied (for the summary and tests)
        self.matches = 0

    def add(self, player: str, like: str | None = None) -> None:
        """Start rating ``player`` (a no-op if it is rated): at the model's prior, or at
        ``like``'s rating (a snapshot starts where its member stood; a copied member where its
        source stood)."""
        if player in self.table:
            return
        if like is not None:
            self.table[player] = self.table[like]
        else:
            self.table[player] = (self.model.mu, self.model.sigma)

    def set_like(self, player: str, like: str) -> None:
        """``player`` now stands where ``like`` stands (a member that copied ``like``'s
        weights); ``like`` must be rated."""
        self.table[player] = self.table[like]

    def remove(self, player: str) -> None:
        """Stop rating ``player`` (a snapshot that left the league)."""
        self.table.pop(player, None)

    def record(self, a: str, b: str, result: float) -> None:
        """Apply one match: ``result`` is ``a``'s (1 win, 0.5 draw, 0 loss). Unrated players
        start at the prior; fixed players keep their ratings."""
        k = result_index(result)
        if a == b:
            raise ValueError(f"a player cannot be rated against itself ({a!r})")
        self.add(a)
        self.add(b)
        ra, rb = (self.model.rating(mu=m, sigma=s) for m, s in (self.table[a], self.table[b]))
        ranks = ([0.0, 1.0], [0.0, 0.0], [1.0, 0.0])[k]
        [[na], [nb]] = self.model.rate([[ra], [rb]], ranks=ranks)
        if a not in self.fixed:
            self.table[a] = (float(na.mu), float(na.sigma))
        if b not in self.fixed:
            self.table[b] = (float(nb.mu), float(nb.sigma))
        self.matches += 1

    def record_many(self, results: Iterable[tuple[str, str, float]]) -> None:
        """:meth:`record` each ``(a, b, result)`` in order."""
        for a, b, result in results:
            self.record(a, b, result)

    def mu(self, player: str) -> float:
        """The rating's mean (the prior's for an unrated player)."""
        return self.table.get(player, (self.model.mu, self.model.sigma))[0]

    def ordinal(self, player: str) -> float:
        """The conservative rating ``mu - 3 sigma``: the fitness of a league member."""
        m, s = self.table.get(player, (self.model.mu, self.model.sigma))
        return m - 3.0 * s

    def win_probability(self, a: str, b: str) -> float:
        """The model's probability that ``a`` beats ``b`` (draws split evenly)."""
        ra, rb = (self.model.rating(mu=m, sigma=s) for m, s in
                  (self.table.get(p, (self.model.mu, self.model.sigma)) for p in (a, b)))
        return float(self.model.predict_win([[ra], [rb]])[0])

    def state_dict(self) -> dict[str, Any]:
        """Every rating, the fixed players and the match count, as plain data."""
        return {"table": {p: [m, s] for p, (m, s) in self.table.items()},
                "fixed": sorted(self.fixed), "matches": self.matches}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.table = {p: (float(m), float(s)) for p, (m, s) in state["table"].items()}
        self.fixed = set(state["fixed"])
        self.matches = int(state["matches"])
