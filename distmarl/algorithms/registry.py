"""The algorithms a config may name: ``algorithm.name`` -> its class."""

from __future__ import annotations

from distmarl.algorithms.base import Algorithm
from distmarl.algorithms.offpolicy import MADDPG, MATD3
from distmarl.algorithms.onpolicy import IPPO, MAPPO

#: every algorithm by the name configs use (its ``name``)
ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (MADDPG, MATD3, IPPO, MAPPO)}


def algorithm_class(name: str) -> type[Algorithm]:
    """The class of algorithm ``name``; ValueError naming it and the known names otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}") from None
