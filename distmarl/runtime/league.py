"""A league run's coordinator side: plans for rollout workers, evaluation games, snapshots.

The decisions are :class:`~distmarl.hpo.league_state.League`'s (pure, seeded with this part's
own ``Generator``); this module carries them out: each collect call carries a
:class:`~distmarl.collect.seating.LeaguePlan` (matches, and every opponent's weights version
and object-store box), training results come back with the chunk, evaluation games are planned here and played on
the members' rollout workers (the fleet's ``play``), and a snapshot is a copy of a member's
published weights in the fleet's store under the snapshot's id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distmarl.collect.league_setup import LeagueSetup
from distmarl.collect.seating import LeaguePlan, MatchResult
from distmarl.config import ExperimentConfig, LeagueConfig
from distmarl.hpo.league_final import FinalGame, final_games, final_rows
from distmarl.hpo.league_state import member_id
from distmarl.hpo.tournament import rank
from distmarl.runtime.actors.clients import Store
from distmarl.runtime.fleet import Play
from distmarl.runtime.run_state import RunState
from distmarl.tracking.plots import plot_win_rates

__all__ = ["LeagueRun", "make_league"]

#: matches planned per sub-env and collect call (a plan repeats when its games are used up)
GAMES_PER_ENV = 4


class LeagueRun:
    """The league of a run (see the module docstring), from its ``setup``; evaluation games
    act as ``explore`` says (``evolution.eval_explore``); snapshots are kept in ``store``."""

    def __init__(self, cfg: LeagueConfig, setup: LeagueSetup, num_envs: int, seed: int,
                 state: RunState, store: Store, explore: bool = False) -> None:
        self.cfg, self.sides, self.state, self.store = cfg, setup.sides, state, store
        self.num_envs = num_envs
        self.explore = explore
        self.rng = np.random.default_rng(seed)
        self.league = setup.league
        #: snapshot id -> [ref] of its frozen weights in the store
        self.snapshot_boxes: dict[str, list[Any]] = {}
        #: games the env's step limit cut (each a draw), by kind: training, evaluation
        self.capped = {"training": 0, "evaluation": 0}

    # ------------------------------------------------------------------ training
    def plan(self, member: int) -> LeaguePlan:
        """The next matches of ``member``'s rollout worker, with their opponents' weights."""
        matches = self.league.training_matches(member, self.rng,
                                               self.num_envs * GAMES_PER_ENV)
        opponents = {}
        for m in matches:
            for side, player in m.seats.items():
                if player != member_id(member):
                    opponents[player] = self._opponent(player, side)
        return LeaguePlan(matches, opponents)

    def _opponent(self, player: str, side: str) -> tuple[int | None, list[Any] | None, str]:
        """``(version, box, side)`` of ``player`` (version -1 for a snapshot: it never
        changes; None for a reference)."""
        kind, _, index = player.partition("/")
        if kind == "ref":
            return None, None, side
        if kind == "snapshot":
            return -1, self.snapshot_boxes[player], side
        m = self.state.members[int(index)]
        return m.version, m.weights_box, side

    def record_training(self, results: Sequence[MatchResult], capped: int = 0) -> None:
        """Training games' results, ``capped`` of them cut by the step limit (draws)."""
        self.league.record_training(results)
        self.capped["training"] += int(capped)

    # ------------------------------------------------------------------ evaluation
    def evaluation_games(self, member: int, seed: int) -> list[Play]:
        """``member``'s evaluation games against each of its opponents, in the league's fixed
        order."""
        m = self.state.members[member]
        side = None if self.sides.symmetric else self.league.side_of_member[member]
        return [Play(member, m.version, m.weights_box, (player, *self._opponent(player, opp_side)),
                     self.cfg.eval_games, seed + 7919 * k, side, self.explore)
                for opp_side, players in self.league.evaluation_opponents(member).items()
                for k, player in enumerate(players)]

    def record_evaluation(self, results: Sequence[Sequence[MatchResult]]) -> int:
        """Rate evaluation games (each set as ``play`` returns it); the number of them the
        step limit cut (draws)."""
        capped = 0
        for games in results:
            self.league.record_evaluation(games)
            capped += int(getattr(games, "capped", 0))
        self.capped["evaluation"] += capped
        return capped

    def fitness(self, member: int) -> float:
        return self.league.fitness(member)

    def reference_ratings(self) -> dict[str, float]:
        """Each reference's rating (ordinal) now."""
        table = self.league.ratings
        return {p: table.ordinal(p) for p in sorted(table.table) if p.startswith("ref/")}

    def best_ratings(self) -> dict[str, float]:
        """Side -> the best rating (ordinal) among its current members."""
        best: dict[str, float] = {}
        for i, side in enumerate(self.league.side_of_member):
            best[side] = max(best.get(side, float("-inf")), self.league.fitness(i))
        return best

    # ------------------------------------------------------------------ final evaluation
    def elites(self, fitness: Sequence[float]) -> dict[str, int]:
        """Side -> its member ranked first by ``fitness`` (selection's, per member), sides in
        the game's order."""
        sides = self.league.side_of_member
        best: dict[str, int] = {}
        for i in rank(list(fitness)):
            best.setdefault(sides[i], i)
        return {s: best[s] for s in dict.fromkeys(sides)}

    def final_games(self, elites: dict[str, int], seed: int) -> list[FinalGame]:
        """The final evaluation's games (:func:`~distmarl.hpo.league_final.final_games`)."""
        return final_games(self.league, elites, seed)

    def final_play(self, game: FinalGame, games: int) -> Play:
        """``games`` games of ``game`` on its learner's rollout worker (a reference learner:
        member 0's)."""
        opponent = (game.opponent, *self._opponent(game.opponent, game.opponent_side))
        kind, _, index = game.learner.partition("/")
        if kind == "ref":
            return Play(0, -1, None, opponent, games, game.seed, game.side, self.explore,
                        learner=game.learner)
        m = self.state.members[int(index)]
        return Play(int(index), m.version, m.weights_box, opponent, games, game.seed, game.side,
                    self.explore)

    @staticmethod
    def final_rows(games: Sequence[FinalGame], results: Sequence[Sequence[MatchResult]]
                   ) -> list[dict[str, Any]]:
        return final_rows(games, [[r for *_, r in res] for res in results],
                          [int(getattr(res, "capped", 0)) for res in results])

    # ------------------------------------------------------------------ between generations
    def copied(self, copies: Sequence[tuple[int, int]]) -> None:
        for member, source in copies:
            self.league.copied(member, source)

    def after_generation(self, generation: int) -> None:
        """Every ``snapshot_every`` generations each member's published weights join the
        league frozen; snapshots that left the bounded pool are dropped."""
        if not self.league.snapshot_due(generation):
            return
        new, gone = self.league.snapshot(generation)
        for snap in new:
            box = self.state.members[snap.member].weights_box
            if box is None:
                raise RuntimeError(f"member {snap.member} has no published weights to freeze")
            self.snapshot_boxes[snap.id] = [self.store.put(self.store.get(box[0]))]  # own copy
        for snap in gone:
            self.snapshot_boxes.pop(snap.id, None)

    def summary(self) -> dict[str, Any]:
        """Ratings (ordinal) of every player, the snapshots held, the games rated, the games
        the step limit cut (draws; training and evaluation), the sides' agents and each
        member's side."""
        lg = self.league
        return {"ratings": {p: lg.ratings.ordinal(p) for p in sorted(lg.ratings.table)},
                "snapshots": lg.pool.ids(), "rated_games": lg.ratings.matches,
                "capped_games": dict(self.capped),
                "sides": {s: list(a) for s, a in self.sides.agents.items()},
                "member_sides": list(lg.side_of_member)}

    def metrics(self) -> dict[str, float]:
        """Every member's and reference's rating (ordinal), the snapshots held, the games
        rated and (once there are any) the games the step limit cut, under namespaced keys
        (``member/3/rating``, ``league/ref/random/rating``)."""
        lg = self.league
        out = {f"{p}/rating": lg.ratings.ordinal(p) for p in lg.ratings.table
               if p.startswith("member/")}
        out |= {f"league/{p}/rating": lg.ratings.ordinal(p) for p in lg.ratings.table
                if p.startswith("ref/")}
        out["league/snapshots"] = float(len(lg.pool.snapshots))
        out["league/rated_games"] = float(lg.ratings.matches)
        out |= {f"league/capped_{kind}_games": float(n) for kind, n in self.capped.items() if n}
        return out

    def plot_win_rates(self, path: Path, newest_snapshots: int = 4) -> Path:
        """The win-rate matrix of the current members, the newest snapshots and the
        references (row player's score rate against the column player, draws half)."""
        lg = self.league
        members = [member_id(i) for i in range(len(lg.side_of_member))]
        refs = sorted(p for p in lg.ratings.table if p.startswith("ref/"))
        players = members + lg.pool.ids()[-newest_snapshots:] + refs
        return plot_win_rates(players, lg.record.matrix(players), path)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The league's plain state and RNG (the snapshots' weights go separately:
        :meth:`snapshot_weights`)."""
        return {"league": self.league.state_dict(), "rng": self.rng.bit_generator.state,
                "capped": dict(self.capped)}

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        return {sid: self.store.get(box[0]) for sid, box in self.snapshot_boxes.items()}

    def load_state_dict(self, state: dict[str, Any], weights: dict[str, dict[str, Any]]) -> None:
        self.league.load_state_dict(state["league"])
        self.rng.bit_generator.state = state["rng"]
        self.capped.update(state.get("capped", {}))
        missing = [s for s in self.league.pool.ids() if s not in weights]
        if missing:
            raise ValueError(f"the checkpoint's league has no weights for {missing}")
        self.snapshot_boxes = {sid: [self.store.put(weights[sid])]
                               for sid in self.league.pool.ids()}


def make_league(cfg: ExperimentConfig, setup: LeagueSetup | None, state: RunState,
                store: Store) -> LeagueRun | None:
    """The run's league from ``cfg.league`` and its ``setup`` (None for a cooperative game:
    no league)."""
    if setup is None:
        return None
    return LeagueRun(cfg.league, setup, cfg.env.num_envs, cfg.seed * 31 + 7, state, store,
                     cfg.evolution.eval_explore)
