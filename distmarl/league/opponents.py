"""A rollout worker's opponents in a league: policies by player id, built once and kept fresh.

A member or snapshot opponent is an algorithm of the run's config loaded with that player's
published weights (``get_weights()`` output: plain numpy), rebuilt only when the weights'
version changes; a reference (``ref/<name>``) is made by name
(:func:`~distmarl.league.references.make_reference`) for the agents of the side it plays.
Opponents act without learning: their weights never change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from distmarl.algorithms import Acting, Policy
from distmarl.config import AlgorithmConfig
from distmarl.factory import make_algorithm
from distmarl.league.references import make_reference

__all__ = ["Opponents"]


class Opponents:
    """Opponent policies by player id (see the module docstring)."""

    def __init__(self, algo_cfg: AlgorithmConfig, spaces: tuple[Any, ...],
                 env_kwargs: Mapping[str, Any], seed: int) -> None:
        self.algo_cfg, self.spaces = algo_cfg, spaces
        self.env_kwargs = dict(env_kwargs)
        self.seed = seed
        #: player id -> (weights version, policy); references have version -1
        self.held: dict[str, tuple[int, Acting]] = {}

    def reference(self, player: str, agents: Sequence[str], seed: int | None = None
                  ) -> Acting:
        """The reference ``player`` (``ref/<name>``) playing ``agents``: the one held, or
        (``seed`` given) a new one seeded with it, not held (evaluation games that must
        play out the same whenever they are played)."""
        if seed is not None or player not in self.held:
            name = player.removeprefix("ref/")
            policy = make_reference(name, agents, self.spaces[0], self.spaces[1],
                                    self.env_kwargs,
                                    self.seed + len(self.held) if seed is None else seed)
            if seed is not None:
                return policy
            self.held[player] = (-1, policy)
        return self.held[player][1]

    def player(self, player: str, version: int, weights: Mapping[str, Any] | None
               ) -> Policy:
        """Member or snapshot ``player`` acting with its weights of ``version``; ``weights``
        may be None when that version is held already (then they are not fetched again)."""
        held = self.held.get(player)
        if held is not None and held[0] == version:
            return cast(Policy, held[1])
        if weights is None:
            raise ValueError(f"opponent {player!r}: weights of version {version} are needed "
                             f"(held: {None if held is None else held[0]})")
        algo = cast(Policy, held[1]) if held is not None else make_algorithm(
            self.algo_cfg, self.spaces, device="cpu", seed=self.seed + len(self.held),
            learner=False)
        algo.set_weights(weights)
        self.held[player] = (version, algo)
        return algo

    def version(self, player: str) -> int | None:
        """The weights version held for ``player`` (None: not held)."""
        held = self.held.get(player)
        return None if held is None else held[0]

    def keep_only(self, players: Iterable[str]) -> None:
        """Drop every opponent not in ``players`` (snapshots that left the league)."""
        keep = set(players)
        self.held = {p: h for p, h in self.held.items() if p in keep}
