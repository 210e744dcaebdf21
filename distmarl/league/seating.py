"""Who holds each seat of a competitive game in each sub-env, while a learner collects.

In a league, a rollout worker's sub-envs each host one match
(:class:`~distmarl.league.plans.Match`): the learning member on its side, an opponent on every
other side (another member, a frozen snapshot or a reference). :class:`Seating` keeps each
sub-env's match, replaces the learner's actions for the opponents' seats by the opponents' own
(:meth:`Seating.override`), says which rows the learner may learn from
(:meth:`Seating.learner_rows`: its own seats only; every seat in a self-play match, where
the learner holds them all), turns an ended episode's returns into a
result (:meth:`Seating.result`) and seats the sub-env's next match from its plan
(:meth:`Seating.replan` gives a new one; running games go on). Opponents are
:class:`~distmarl.algorithms.Acting` objects by player id; the caller builds them
(from weights, or a reference) and keeps them fresh.

Results: a side's score is its agents' summed return. By default the learner wins when its
side's score is above every other side's, loses when below one, else draws (zero-sum games:
the sign of its return). Mixed games, whose scores do not oppose (simple_tag's prey loses
points at the arena's edge whatever the predators do), name one side and a threshold instead
(``win_above={"predators": 0}``): that side wins a game when its score is above the threshold,
and every other side wins otherwise.

A game the env's step limit cut (``env.max_episode_steps``: it was not finished) is a draw
for everyone, whatever the scores so far; :func:`play_games` counts such games
(:attr:`GameResults.capped`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from distmarl.agents import Sides
from distmarl.algorithms import Acting
from distmarl.collect.cancel import NEVER, Cancel
from distmarl.collect.evaluation import Seats, episode_outcomes
from distmarl.collect.seats import MatchResult
from distmarl.league.plans import Match

__all__ = [
    "DRAW",
    "GameResults",
    "LeaguePlan",
    "MatchResult",
    "Seating",
    "SeatingRules",
    "check_win_above",
    "play_games",
    "side_result",
]

#: (learner, opponent, the learner's result: 1 win, 0.5 draw, 0 loss)
#: the result of a draw, and of a game the step limit cut
DRAW = 0.5


class GameResults(list[MatchResult]):
    """Games' results (a plain list of :data:`MatchResult`) and ``capped``: how many of those
    games the step limit cut (each counted as a draw)."""

    capped: int = 0

    def __init__(self, results: Iterable[MatchResult] = (), capped: int = 0) -> None:
        super().__init__(results)
        self.capped = int(capped)


class SeatingRules(NamedTuple):
    """What a rollout worker knows of a league's game (plain data): its sides, how a game's
    result is read, and the share of opponents' training moves made at random
    (:class:`Seating`'s ``epsilon``)."""

    sides: Sides
    win_above: dict[str, float] | None = None
    opponent_epsilon: float = 0.0


class LeaguePlan(NamedTuple):
    """A worker's next league games (plain data): the matches its sub-envs start, in order,
    and each opponent's ``(weights version, weights box, side)`` (version and box None for a
    reference; the box holds one object-store reference, fetched only for a new version)."""

    matches: list[Match]
    opponents: dict[str, tuple[int | None, list[Any] | None, str]]


class Seating:
    """Each sub-env's match for one learner; see the module docstring. ``plan``: the matches
    sub-envs start, in order (the first ``num_envs`` now, the next one whenever an episode
    ends; the plan repeats when used up); ``policies``: the opponents' by player id.

    ``epsilon``: each opponent action of a training game is replaced, with this probability,
    by ``noise``'s (uniformly random legal play), drawn from a generator seeded with ``seed``.
    Strong opponents rarely leave the positions that weak play reaches (two of a line left
    open, say), so a learner trained only against them may never learn to answer those; a
    few random moves put such positions into ordinary games. Evaluation games
    (:func:`play_games`) never add them."""

    def __init__(self, sides: Sides, num_envs: int, learner: str, plan: Sequence[Match],
                 policies: Mapping[str, Acting],
                 win_above: Mapping[str, float] | None = None, epsilon: float = 0.0,
                 noise: Acting | None = None, seed: int = 0) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"league.opponent_epsilon must be within [0, 1], got {epsilon}")
        if epsilon > 0 and noise is None:
            raise ValueError("opponent_epsilon > 0 needs a policy for the random moves")
        self.sides, self.learner, self.num_envs = sides, learner, num_envs
        self.win_above = check_win_above(sides, win_above)
        self.epsilon, self.noise = epsilon, noise
        self.rng = np.random.default_rng(seed)
        self.policies = dict(policies)
        self.plan: list[Match] = []
        self.next = 0
        #: each sub-env's running match
        self.matches: list[Match] = []
        self.replan(plan, policies)
        self.matches = [self._next_match() for _ in range(num_envs)]
        #: each agent's return so far in each sub-env's running episode
        self.returns: dict[str, np.ndarray] = {}

    def replan(self, plan: Sequence[Match], policies: Mapping[str, Acting]) -> None:
        """New matches for the sub-envs' next episodes (running games go on), and the policies
        of their opponents (added to or replacing those held); policies that neither the plan
        nor a running game seats are let go (snapshots that left the league)."""
        if not plan:
            raise ValueError("a league plan needs at least one match")
        self.policies.update(policies)
        self._check(list(plan))
        self.plan, self.next = list(plan), 0
        seated = {p for m in [*self.plan, *self.matches] for p in m.seats.values()}
        self.policies = {p: pol for p, pol in self.policies.items() if p in seated}

    def _next_match(self) -> Match:
        match = self.plan[self.next % len(self.plan)]
        self.next += 1
        return match

    def _check(self, matches: list[Match]) -> None:
        for m in matches:
            if set(m.seats) != set(self.sides.agents):
                raise ValueError(f"a match seats sides {sorted(m.seats)}, the game has "
                                 f"{sorted(self.sides.agents)}")
            if m.seats[m.learner_side] != self.learner:
                raise ValueError(f"the learner {self.learner!r} does not hold its side "
                                 f"{m.learner_side!r} in {m.seats}")
            missing = [p for p in m.seats.values()
                       if p != self.learner and p not in self.policies]
            if missing:
                raise ValueError(f"no policy for opponent(s) {missing}")

    def player(self, env: int, agent: str) -> str:
        """Who acts for ``agent`` in sub-env ``env``."""
        return self.matches[env].seats[self.sides.side_of(agent)]

    def learner_rows(self, agents: list[str]) -> dict[str, np.ndarray]:
        """bool ``(num_envs,)`` per agent: True where the learner holds the agent's seat."""
        return {a: np.array([self.player(e, a) == self.learner for e in range(self.num_envs)])
                for a in agents}

    def override(self, actions: dict[str, np.ndarray], obs: Mapping[str, Any],
                 explore: bool) -> dict[str, np.ndarray]:
        """``actions`` with every opponent seat's action chosen by that opponent, from the
        same observations. Each opponent is asked once, with the whole batch of every agent
        it plays in some sub-env (a policy that shares one network across a group's agents
        needs as many rows of each), and its actions are taken for its seats only; then
        each opponent action is made at random with probability ``epsilon``."""
        out = {a: np.array(v, copy=True) for a, v in actions.items()}
        by_player: dict[str, dict[str, list[int]]] = {}
        for a in obs:
            for e in range(self.num_envs):
                p = self.player(e, a)
                if p != self.learner:
                    by_player.setdefault(p, {}).setdefault(a, []).append(e)
        for p, seats in by_player.items():
            chosen = self.policies[p].act({a: obs[a] for a in seats}, explore=explore)
            for a, envs in seats.items():
                out[a][envs] = np.asarray(chosen[a])[envs]
        if self.epsilon > 0:
            self._randomise(out, obs, by_player)
        return out

    def _randomise(self, out: dict[str, np.ndarray], obs: Mapping[str, Any],
                   by_player: Mapping[str, Mapping[str, list[int]]]) -> None:
        """Each opponent seat's action in ``out``, with probability ``epsilon``, replaced by
        ``noise``'s for the same observation (one draw per agent and sub-env, in agent then
        sub-env order, so a seed gives the same moves)."""
        assert self.noise is not None
        seats: dict[str, list[int]] = {}
        for player_seats in by_player.values():
            for a, envs in player_seats.items():
                seats.setdefault(a, []).extend(envs)
        for a in obs:
            envs = sorted(seats.get(a, ()))
            flip = [e for e, u in zip(envs, self.rng.random(len(envs))) if u < self.epsilon]
            if flip:
                out[a][flip] = np.asarray(self.noise.act({a: obs[a]})[a])[flip]

    def step(self, rew: Mapping[str, Any], ended: np.ndarray,
             capped: np.ndarray | None = None) -> list[MatchResult]:
        """Add one step's rewards ``agent -> (num_envs,)``; the matches of sub-envs whose
        episode ended (``ended`` bool ``(num_envs,)``) give their results (draws where
        ``capped``, bool ``(num_envs,)``: the step limit ended them) and are reseated."""
        for a, r in rew.items():
            self.returns.setdefault(a, np.zeros(self.num_envs))
            self.returns[a] += np.asarray(r, dtype=np.float64)
        results: list[MatchResult] = []
        for e in np.flatnonzero(ended):
            results += self.result(int(e), {a: float(r[e]) for a, r in self.returns.items()},
                                   capped is not None and bool(capped[e]))
            for r in self.returns.values():
                r[e] = 0.0
        return results

    def result(self, env: int, returns: Mapping[str, float],
               capped: bool = False) -> list[MatchResult]:
        """The ended match of sub-env ``env`` as results of the learner against each opponent
        (see the module docstring; a draw when ``capped``; none for the seats it held
        itself), and the sub-env's next match seated."""
        match = self.matches[env]
        result = DRAW if capped else side_result(self.sides, match.learner_side, returns,
                                                 self.win_above)
        results = [(self.learner, p, result) for p in match.seats.values()
                   if p != self.learner]
        self.matches[env] = self._next_match()
        return results


def check_win_above(sides: Sides, win_above: Mapping[str, float] | None
                    ) -> dict[str, float] | None:
    """``win_above`` checked: one side of the game and its threshold (ValueError naming it)."""
    if not win_above:
        return None
    if len(win_above) != 1 or next(iter(win_above)) not in sides.agents:
        raise ValueError(f"league.win_above names one side of the game and its threshold "
                         f"(sides: {list(sides.agents)}), got {dict(win_above)}")
    return dict(win_above)


def side_result(sides: Sides, side: str, returns: Mapping[str, float],
                win_above: Mapping[str, float] | None = None) -> float:
    """``side``'s result from an episode's returns per agent (see the module docstring)."""
    score = {s: float(sum(returns[a] for a in agents if a in returns))
             for s, agents in sides.agents.items()}
    if win_above:
        (decider, threshold), = win_above.items()
        decided = score[decider] > threshold
        return float(decided if side == decider else not decided)
    own = score[side]
    others = [v for s, v in score.items() if s != side]
    if all(own > o for o in others):
        return 1.0
    return 0.0 if any(own < o for o in others) else 0.5


def play_games(venv: Any, sides: Sides, side: str | None, learner: tuple[str, Acting],
               opponent: tuple[str, Acting], games: int, seed: int, explore: bool = False,
               win_above: Mapping[str, float] | None = None, cancel: Cancel = NEVER
               ) -> GameResults:
    """``games`` evaluation games of the learner (``(player id, policy)``) against one
    opponent, who holds every other side. The learner plays ``side``; in a symmetric game
    (``side`` None) it takes each seat for an equal share of the games (the first seats one
    more when they do not divide). Results as :meth:`Seating.result` gives them (a game the
    step limit cut is a draw, and counted in ``capped``); the games of one seating are played
    together on the sub-envs, seeded ``seed + k`` for seating ``k``. ``cancel`` is asked
    before every step: once set, the games stop with
    :class:`~distmarl.collect.cancel.Cancelled` (a stopped game is no result)."""
    (me, mine), (them, theirs) = learner, opponent
    if (side is None) != sides.symmetric:
        raise ValueError("a symmetric game's learner takes every seat (side None); an "
                         "asymmetric game's plays its own side")
    own_sides = list(sides.agents) if side is None else [side]
    results = GameResults()
    for k, seat in enumerate(own_sides):
        count = games // len(own_sides) + (1 if k < games % len(own_sides) else 0)
        if not count:
            continue
        seats = {a: (mine if s == seat else theirs) for s, agents in sides.agents.items()
                 for a in agents}
        per_env = -(-count // venv.num_envs)
        out = episode_outcomes(venv, Seats(seats), per_env, seed=seed + k, explore=explore,
                               cancel=cancel)
        for returns, capped in zip(out.returns[:count], out.capped[:count], strict=True):
            results.append((me, them, DRAW if capped else side_result(sides, seat, returns,
                                                                      win_above)))
            results.capped += capped
    return results

