"""A league run's coordinator side: plans for rollout workers, evaluation games, snapshots.

The decisions are :class:`~distmarl.league.state.League`'s (pure, seeded with this part's
own ``Generator``); this module carries them out: each collect call carries a
:class:`~distmarl.league.seating.LeaguePlan` (matches, and every opponent's weights version
and object-store box), training results come back with the chunk, evaluation games are planned here and played on
the members' rollout workers (the fleet's ``play``), and a snapshot is a copy of a member's
published weights in the fleet's store under the snapshot's id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distmarl.config import ExperimentConfig, LeagueConfig
from distmarl.hpo.tournament import rank
from distmarl.league.final import RANDOM, FinalPairing, final_games, final_rows, pooled, rows_of
from distmarl.league.seating import LeaguePlan, MatchResult
from distmarl.league.setup import LeagueSetup
from distmarl.league.state import member_id
from distmarl.runtime.fleets.protocol import Fleet, Play
from distmarl.runtime.hooks.base import CooperativeHooks, Evaluated, GameHooks
from distmarl.runtime.logic.run_state import FinalEvaluation, RunState

__all__ = ["LeagueHooks", "make_hooks"]

#: matches planned per sub-env and collect call (a plan repeats when its games are used up)
GAMES_PER_ENV = 4


class LeagueHooks:
    """The league of a run (see the module docstring), from its ``setup``: the run's
    :class:`~distmarl.runtime.hooks.base.GameHooks` hooks for a competitive or mixed game. Games are
    played through ``fleet`` (snapshots kept in its store); evaluation games act as
    ``explore`` says (``evolution.eval_explore``)."""

    def __init__(self, cfg: LeagueConfig, setup: LeagueSetup, num_envs: int, seed: int,
                 state: RunState, fleet: Fleet, explore: bool = False) -> None:
        self.cfg, self.sides, self.state, self.fleet = cfg, setup.sides, state, fleet
        self.store = fleet.store
        self.num_envs = num_envs
        self.explore = explore
        self.rng = np.random.default_rng(seed)
        self.league = setup.league
        #: snapshot id -> [ref] of its frozen weights in the store
        self.snapshot_boxes: dict[str, list[Any]] = {}
        #: games the env's step limit cut (each a draw), by kind: training, evaluation
        self.capped = {"training": 0, "evaluation": 0}

    # ------------------------------------------------------------------ training
    def plan_collect(self, member: int) -> LeaguePlan:
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

    def evaluate(self, members: Sequence[int], seed: int) -> Evaluated:
        """Every member's evaluation games against its league opponents, their results rated
        in member order (so the ratings do not depend on which game finished first); fitness
        is each member's rating."""
        games = {i: self.evaluation_games(i, seed) for i in members}
        results = iter(self.fleet.play([g for i in members for g in games[i]]))
        capped = {i: self.record_evaluation([next(results) for _ in games[i]]) for i in members}
        return Evaluated({i: self.fitness(i) for i in members}, capped, "league evaluation")

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

    def final(self, fitness: Sequence[float], episodes: int, seed: int
              ) -> tuple[FinalEvaluation, dict[int, int]]:
        """The final games (:mod:`distmarl.league.final`), ``episodes`` each: every member
        against the references, the sides' elites (ranked by ``fitness`` within their side)
        against each other, and random play's baseline."""
        elites = self.elites(fitness)
        plan = final_games(self.league, elites, seed)
        rows = self.final_rows(plan, self.fleet.play([self.final_play(g, episodes)
                                                      for g in plan]))
        n = len(self.state.members)
        capped = {i: sum(r["capped"] for r in rows_of(rows, member_id(i))) for i in range(n)}
        scores = [pooled(rows_of(rows, member_id(i))) for i in range(n)]
        first = next(iter(elites))
        return FinalEvaluation(
            episodes=episodes, seed=seed, elite=elites[first], scores=[s for s, _ in scores],
            stderr=[e for _, e in scores],
            random_score=pooled(rows_of(rows, RANDOM, "baseline", first))[0],
            elites=elites, games=rows), capped

    def final_play(self, game: FinalPairing, games: int) -> Play:
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
    def final_rows(games: Sequence[FinalPairing], results: Sequence[Sequence[MatchResult]]
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

    def progress(self) -> dict[str, Any]:
        """Each side's best rating, for the progress line."""
        return {"best_rating": self.best_ratings()}

    def summary(self) -> dict[str, Any]:
        """``league``: ratings (ordinal) of every player, the snapshots held, the games rated,
        the games the step limit cut (draws; training and evaluation), the sides' agents and
        each member's side."""
        lg = self.league
        return {"league": {
            "ratings": {p: lg.ratings.ordinal(p) for p in sorted(lg.ratings.table)},
            "snapshots": lg.pool.ids(), "rated_games": lg.ratings.matches,
            "capped_games": dict(self.capped),
            "sides": {s: list(a) for s, a in self.sides.agents.items()},
            "member_sides": list(lg.side_of_member)}}

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

    def plots(self, out: Path, fitness_history: Sequence[Sequence[float]]) -> list[Path]:
        """Ratings over generations against the references' (random play's stays 0), and
        the win-rate matrix."""
        from distmarl.tracking.plots import plot_fitness

        return [plot_fitness(fitness_history, out / "fitness.png", "Rating of every member",
                             "rating (OpenSkill ordinal; random play 0)",
                             self.reference_ratings()),
                self.plot_win_rates(out / "win_rates.png")]

    def plot_win_rates(self, path: Path) -> Path:
        """The win-rate matrix of the current members, the newest snapshots and the
        references (row player's score rate against the column player, draws half)."""
        from distmarl.tracking.plots import plot_win_rates

        players = self._matrix_players()
        return plot_win_rates(players, self.league.record.matrix(players), path)

    def videos(self, elite: int, fitness: Sequence[float]
               ) -> dict[str, list[tuple[int | str, list[str] | None]]]:
        """``elite``: each side's elite in its side's seats, against each other (a symmetric
        game's elite in the first seat, against random moves in the others); then for each
        reference but random and each side's elite it meets, ``<side>_vs_<reference>`` (a
        symmetric game: ``elite_vs_<reference>``), the reference in the seats of the sides it
        plays, the other sides' elites in theirs."""
        elites = self.elites(fitness)
        agents = {side: list(seats) for side, seats in self.sides.agents.items()}
        out: dict[str, list[tuple[int | str, list[str] | None]]] = {
            "elite": [(m, agents[side]) for side, m in elites.items()]}
        for side, m in elites.items():
            for ref in sorted({r for s, refs in self.league.references.items() if s != side
                               for r in refs if r != "random"}):
                ref_sides = [s for s, refs in self.league.references.items()
                             if s != side and ref in refs]
                stem = "elite" if self.sides.symmetric else side
                out[f"{stem}_vs_{ref}"] = [
                    (m, agents[side]), (ref, [a for s in ref_sides for a in agents[s]]),
                    *((other, agents[s]) for s, other in elites.items()
                      if s != side and s not in ref_sides)]
        return out

    def tables(self) -> dict[str, dict[str, list[Any]]]:
        """``league/ratings.json``: every player's rating (ordinal) and OpenSkill ``mu`` /
        ``sigma``; ``league/win_rates.json``: the win-rate matrix of :meth:`plot_win_rates`,
        a row per player, a column per opponent."""
        lg = self.league
        players = sorted(lg.ratings.table)
        ratings: dict[str, list[Any]] = {
            "player": players, "rating": [lg.ratings.ordinal(p) for p in players],
            "mu": [lg.ratings.table[p][0] for p in players],
            "sigma": [lg.ratings.table[p][1] for p in players]}
        rows = self._matrix_players()
        matrix = lg.record.matrix(rows)
        win_rates: dict[str, list[Any]] = {"player": rows}
        win_rates |= {col: [float(x) for x in matrix[:, j]] for j, col in enumerate(rows)}
        return {"league/ratings.json": ratings, "league/win_rates.json": win_rates}

    def _matrix_players(self, newest_snapshots: int = 4) -> list[str]:
        """The current members, the newest snapshots and the references."""
        lg = self.league
        members = [member_id(i) for i in range(len(lg.side_of_member))]
        refs = sorted(p for p in lg.ratings.table if p.startswith("ref/"))
        return members + lg.pool.ids()[-newest_snapshots:] + refs

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """``league``: the league's plain state and RNG (the snapshots' weights go
        separately: :meth:`snapshot_weights`)."""
        return {"league": {"league": self.league.state_dict(),
                           "rng": self.rng.bit_generator.state, "capped": dict(self.capped)}}

    def snapshot_weights(self) -> dict[str, dict[str, Any]]:
        return {sid: self.store.get(box[0]) for sid, box in self.snapshot_boxes.items()}

    def load_state_dict(self, meta: dict[str, Any], weights: dict[str, dict[str, Any]]) -> None:
        """Restore from a checkpoint's ``meta`` (:meth:`state_dict`) and snapshot ``weights``."""
        if "league" not in meta:
            raise ValueError("the checkpoint holds no league: it is of a cooperative run")
        state = meta["league"]
        self.league.load_state_dict(state["league"])
        self.rng.bit_generator.state = state["rng"]
        self.capped.update(state.get("capped", {}))
        missing = [s for s in self.league.pool.ids() if s not in weights]
        if missing:
            raise ValueError(f"the checkpoint's league has no weights for {missing}")
        self.snapshot_boxes = {sid: [self.store.put(weights[sid])]
                               for sid in self.league.pool.ids()}


def make_hooks(cfg: ExperimentConfig, setup: LeagueSetup | None, state: RunState,
               fleet: Fleet) -> GameHooks:
    """The run's game hooks: its league from ``cfg.league`` and ``setup``, or (no setup) a
    cooperative game."""
    if setup is None:
        return CooperativeHooks(fleet, cfg.evolution)
    return LeagueHooks(cfg.league, setup, cfg.env.num_envs, cfg.seed * 31 + 7, state, fleet,
                       cfg.evolution.eval_explore)
