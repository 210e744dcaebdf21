"""A league's pure state from a run's config and its env's spaces: sides, references, players.

The coordinator builds its league from here, and so does ``distmarl evaluate`` on a league
checkpoint (to play the run's final games again, without Ray).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from distmarl.agents import Sides, resolve_sides
from distmarl.config import ExperimentConfig
from distmarl.league.plans import OpponentSource
from distmarl.league.references import reference_sides
from distmarl.league.seating import check_win_above
from distmarl.league.state import League, LeagueSettings

__all__ = ["LeagueSetup", "league_setup", "side_of_members"]


class LeagueSetup(NamedTuple):
    """The game's sides, each reference's sides, and the league of players (plain state)."""

    sides: Sides
    references: dict[str, list[str]]
    league: League


def side_of_members(sides: Sides, population_size: int) -> list[str]:
    """Each member's side: ``population_size`` per side in order, or (symmetric) every member
    on the first seat's pool."""
    if sides.symmetric:
        return [next(iter(sides.agents))] * population_size
    return [s for s in sides.agents for _ in range(population_size)]


def league_setup(cfg: ExperimentConfig, spaces: tuple[Any, ...]) -> LeagueSetup | None:
    """``cfg.league`` checked against the env's ``(observation, action)`` spaces (ValueError
    naming the field) and its league; None for a cooperative game."""
    if not cfg.league.enabled:
        return None
    lc = cfg.league
    sides = resolve_sides(list(spaces[0]), spaces[0], spaces[1], lc.sides, lc.symmetric)
    if sides is None:
        return None
    check_win_above(sides, lc.win_above)
    refs = reference_sides(lc.references, sides, spaces[0], spaces[1], cfg.env.kwargs)
    by_side: dict[str, list[str]] = {s: [] for s in sides.agents}
    for name, plays in refs.items():
        for s in plays:
            by_side[s].append(name)
    opponents = tuple(OpponentSource(o.source, o.share, o.weighting) for o in lc.opponents)
    settings = LeagueSettings(tuple(sides.agents), sides.symmetric, lc.snapshot_every,
                              lc.max_snapshots, opponents)
    league = League(side_of_members(sides, cfg.population.size), by_side, settings)
    return LeagueSetup(sides, refs, league)
