"""A rollout worker's side of the league: who sits where in its sub-envs, and its games.

A worker of a league run holds :class:`LeagueSeats`: the opponents it was told to meet (members'
published weights, frozen snapshots, reference players; each built once, reloaded only when
their weights change), seated in its training sub-envs by each collect call's
:class:`~distmarl.league.seating.LeaguePlan`, and plays evaluation and final games on request.
A worker of a cooperative run holds :class:`NoLeague`: no plan to seat, no games to play.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from distmarl.collect import Collector, RandomPolicy
from distmarl.collect.cancel import Cancel
from distmarl.config import AlgorithmConfig
from distmarl.league.opponents import Opponents
from distmarl.league.seating import GameResults, LeaguePlan, Seating, SeatingRules, play_games
from distmarl.league.state import member_id

__all__ = ["LeagueSeats", "NoLeague", "WorkerLeague", "worker_league"]

#: an opponent as a collect or play call names it: ``(player, version, weights box, side)``
Opponent = tuple[str, int | None, list[Any] | None, str]


class WorkerLeague(Protocol):
    """A worker's league (or its absence)."""

    def seat(self, plan: LeaguePlan | None, collector: Collector) -> None:
        """Seat ``plan``'s matches in ``collector``'s sub-envs (None: nothing to seat)."""

    def reference_player(self, name: str, side: str | None, seed: int) -> tuple[str, Any]:
        """Reference player ``name`` (``ref/<kind>``) holding ``side``'s seats (None: every
        seat), made afresh with ``seed``."""

    def play(self, venv: Any, me: tuple[str, Any], opponent: Opponent, games: int, seed: int,
             side: str | None, explore: bool, cancel: Cancel) -> GameResults:
        """``games`` games of ``me`` on ``side`` against ``opponent`` on ``venv``, stopped
        part-way once ``cancel`` is set."""


class NoLeague:
    """A cooperative run's worker: no seats to give, no games to play."""

    def seat(self, plan: LeaguePlan | None, collector: Collector) -> None:
        if plan is not None:
            raise ValueError("a league plan for a worker of a cooperative run")

    def reference_player(self, name: str, side: str | None, seed: int) -> tuple[str, Any]:
        raise ValueError("reference players are for league runs (league.sides or "
                         "league.symmetric)")

    def play(self, venv: Any, me: tuple[str, Any], opponent: Opponent, games: int, seed: int,
             side: str | None, explore: bool, cancel: Cancel) -> GameResults:
        raise ValueError("play() is for league runs (league.sides or league.symmetric)")


class LeagueSeats:
    """Member ``member``'s worker in a league ``game``: opponents built from ``algo_cfg`` and
    ``spaces`` (references with the env's ``env_kwargs``), their weights read with ``fetch``
    from the boxes a plan carries; random moves for ``opponent_epsilon`` of the opponents'
    training moves in ``action_spaces``; seeded by ``seed``."""

    def __init__(self, game: SeatingRules, member: int, algo_cfg: AlgorithmConfig,
                 spaces: tuple[Any, ...], env_kwargs: Mapping[str, Any], seed: int,
                 fetch: Callable[[Any], Any]) -> None:
        self.game, self.member, self.seed, self.fetch = game, member, seed, fetch
        self.action_spaces = spaces[1]
        self.opponents = Opponents(algo_cfg, spaces, env_kwargs, seed)
        self.seating: Seating | None = None

    def seat(self, plan: LeaguePlan | None, collector: Collector) -> None:
        """Opponents for ``plan``'s matches, then seat them (the first plan seats every
        sub-env; later plans the games that start from now on)."""
        if plan is None:
            raise ValueError("a collect call of a league run needs its plan")
        policies = {p: self.opponent(p, v, box, side)
                    for p, (v, box, side) in plan.opponents.items()}
        if self.seating is None:
            eps = self.game.opponent_epsilon
            random = (RandomPolicy(copy.deepcopy(dict(self.action_spaces)), self.seed)
                      if eps > 0 else None)
            self.seating = Seating(self.game.sides, collector.venv.num_envs,
                                   member_id(self.member), plan.matches, policies,
                                   self.game.win_above, eps, random, self.seed)
            collector.set_seating(self.seating)
        else:
            self.seating.replan(plan.matches, policies)
        self.opponents.keep_only(self.seating.policies)  # snapshots that left go here too

    def opponent(self, player: str, version: int | None, box: list[Any] | None,
                 side: str) -> Any:
        """The opponent ``player`` with its weights of ``version`` (fetched only when new;
        None: a reference player)."""
        if version is None:
            return self.opponents.reference(player, self.game.sides.agents[side])
        weights = None
        if self.opponents.version(player) != version:
            if box is None:
                raise ValueError(f"opponent {player!r}: no weights for version {version}")
            weights = self.fetch(box[0])
        return self.opponents.player(player, version, weights)

    def reference_player(self, name: str, side: str | None, seed: int) -> tuple[str, Any]:
        agents = self.game.sides.agents
        seats = [a for s in (agents if side is None else [side]) for a in agents[s]]
        return name, self.opponents.reference(name, seats, seed)

    def play(self, venv: Any, me: tuple[str, Any], opponent: Opponent, games: int, seed: int,
             side: str | None, explore: bool, cancel: Cancel) -> GameResults:
        """References are made afresh, seeded by ``seed``, so the same games give the same
        results again (``distmarl evaluate``)."""
        player, version, box, opp_side = opponent
        if version is None:
            policy = self.opponents.reference(player, self.game.sides.agents[opp_side], seed)
        else:
            policy = self.opponent(player, version, box, opp_side)
        return play_games(venv, self.game.sides, side, me, (player, policy), games, seed,
                          explore, self.game.win_above, cancel)


def worker_league(game: SeatingRules | None, member: int, algo_cfg: AlgorithmConfig,
                  spaces: tuple[Any, ...], env_kwargs: Mapping[str, Any], seed: int,
                  fetch: Callable[[Any], Any]) -> WorkerLeague:
    """:class:`LeagueSeats` for a league ``game``, :class:`NoLeague` without one."""
    if game is None:
        return NoLeague()
    return LeagueSeats(game, member, algo_cfg, spaces, env_kwargs, seed, fetch)
