"""Who holds each seat of a competitive game in each sub-env, while a learner collects.

In a league, a rollout worker's sub-envs each host one match (:class:`~distmarl.hpo.league.Match`):
the learning member on its side, an opponent on every other side (another member, a frozen
snapshot or a reference). :class:`Seating` keeps each sub-env's match, replaces the learner's
actions for the opponents' seats by the opponents' own (:meth:`Seating.override`), says which
rows the learner may learn from (:meth:`Seating.learner_rows`: its own seats only), turns an
ended episode's returns into a result (:meth:`Seating.result`) and seats the sub-env's next
match from its plan (:meth:`Seating.replan` gives a new one; running games go on). Opponents are :class:`~distmarl.collect.evaluation.Policy` objects by player id; the
caller builds them (from weights, or a reference) and keeps them fresh.

Results: a side's score is its agents' summed return; the learner wins when its side's score
is above every other side's, loses when below one, else draws (zero-sum games: the sign of its
return).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.agents import Sides
from distmarl.collect.evaluation import Policy
from distmarl.hpo.league import Match

__all__ = ["MatchResult", "Seating"]

#: (learner, opponent, the learner's result: 1 win, 0.5 draw, 0 loss)
MatchResult = tuple[str, str, float]


class Seating:
    """Each sub-env's match for one learner; see the module docstring. ``plan``: the matches
    sub-envs start, in order (the first ``num_envs`` now, the next one whenever an episode
    ends; the plan repeats when used up); ``policies``: the opponents' by player id."""

    def __init__(self, sides: Sides, num_envs: int, learner: str, plan: Sequence[Match],
                 policies: Mapping[str, Policy]) -> None:
        self.sides, self.learner, self.num_envs = sides, learner, num_envs
        self.policies = dict(policies)
        self.plan: list[Match] = []
        self.next = 0
        self.replan(plan, policies)
        self.matches: list[Match] = [self._next_match() for _ in range(num_envs)]
        #: each agent's return so far in each sub-env's running episode
        self.returns: dict[str, np.ndarray] = {}

    def replan(self, plan: Sequence[Match], policies: Mapping[str, Policy]) -> None:
        """New matches for the sub-envs' next episodes (running games go on), and the policies
        of their opponents (added to or replacing those held)."""
        if not plan:
            raise ValueError("a league plan needs at least one match")
        self.policies.update(policies)
        self._check(list(plan))
        self.plan, self.next = list(plan), 0

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
            missing = [p for s, p in m.seats.items() if s != m.learner_side
                       and p not in self.policies]
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
        same observations (each opponent is asked once, for all sub-envs it plays in)."""
        out = {a: np.array(v, copy=True) for a, v in actions.items()}
        by_player: dict[str, dict[str, list[int]]] = {}
        for a in obs:
            for e in range(self.num_envs):
                p = self.player(e, a)
                if p != self.learner:
                    by_player.setdefault(p, {}).setdefault(a, []).append(e)
        for p, seats in by_player.items():
            sub = {a: _rows(obs[a], envs) for a, envs in seats.items()}
            chosen = self.policies[p].act(sub, explore=explore)
            for a, envs in seats.items():
                out[a][envs] = chosen[a]
        return out

    def step(self, rew: Mapping[str, Any], ended: np.ndarray) -> list[MatchResult]:
        """Add one step's rewards ``agent -> (num_envs,)``; the matches of sub-envs whose
        episode ended (``ended`` bool ``(num_envs,)``) give their results and are reseated."""
        for a, r in rew.items():
            self.returns.setdefault(a, np.zeros(self.num_envs))
            self.returns[a] += np.asarray(r, dtype=np.float64)
        results: list[MatchResult] = []
        for e in np.flatnonzero(ended):
            results += self.result(int(e), {a: float(r[e]) for a, r in self.returns.items()})
            for r in self.returns.values():
                r[e] = 0.0
        return results

    def result(self, env: int, returns: Mapping[str, float]) -> list[MatchResult]:
        """The ended match of sub-env ``env`` as results of the learner against each opponent
        (see the module docstring), and the sub-env's next match seated."""
        match = self.matches[env]
        score = {s: float(sum(returns[a] for a in agents if a in returns))
                 for s, agents in self.sides.agents.items()}
        own = score[match.learner_side]
        others = [score[s] for s in match.seats if s != match.learner_side]
        result = 1.0 if all(own > o for o in others) else (
            0.0 if any(own < o for o in others) else 0.5)
        results = [(self.learner, p, result) for s, p in match.seats.items()
                   if s != match.learner_side]
        self.matches[env] = self._next_match()
        return results


def _rows(x: Any, envs: list[int]) -> Any:
    """Rows ``envs`` of one agent's batched observation (an array, or a dict of them)."""
    if isinstance(x, Mapping):
        return {k: _rows(v, envs) for k, v in x.items()}
    return np.asarray(x)[envs]
