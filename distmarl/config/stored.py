"""A config as a checkpoint stored it, read by today's schema.

A checkpoint keeps its run's whole config as plain data, every field written out. Fields the
schema has since replaced are translated, so an older run's members can still be loaded and
scored (``distmarl evaluate``):

- ``league.current_share`` / ``reference_share`` / ``pfsp`` / ``reference_pfsp`` (positional
  opponent shares) become the ``league.opponents`` list that draws the same opponents;
  ``self_share`` goes (self-play by share is no longer offered);
- an ``evolution.hp_config`` range's ``dtype`` is dropped, to be inferred again from its
  hyperparameter's type (an integer one stored as ``float`` would be refused);
- ``evolution`` keeps the keys of its mode only (one section held every mode's keys).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from distmarl.config.evolution import keys_of_mode
from distmarl.config.experiment import ExperimentConfig

__all__ = ["stored_config"]

#: the league keys the opponents list replaced
OLD_LEAGUE_KEYS = ("current_share", "reference_share", "pfsp", "reference_pfsp", "self_share")


def stored_config(data: Mapping[str, Any]) -> ExperimentConfig:
    """``data`` (a checkpoint's ``meta["config"]``) as an :class:`ExperimentConfig`."""
    out = copy.deepcopy(dict(data))
    league = out.get("league")
    if isinstance(league, dict) and any(k in league for k in OLD_LEAGUE_KEYS):
        league["opponents"] = _opponents(league)
        for key in OLD_LEAGUE_KEYS:
            league.pop(key, None)
    evolution = out.get("evolution")
    if isinstance(evolution, dict):
        out["evolution"] = evolution = keys_of_mode(evolution, evolution.get("mode", "sync"))
        for spec in evolution.get("hp_config", {}).values():
            if isinstance(spec, dict):
                spec.pop("dtype", None)
    return ExperimentConfig.model_validate(out)


def _opponents(league: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The opponents list drawing as the positional shares did: references first with their
    share, then current members and snapshots splitting the rest."""
    weighting = league.get("pfsp", "hard")
    reference = float(league.get("reference_share", 0.0))
    current = float(league.get("current_share", 0.5))
    sources = [("reference", reference, league.get("reference_pfsp") or weighting),
               ("current", (1 - reference) * current, weighting),
               ("snapshot", (1 - reference) * (1 - current), weighting)]
    return [{"source": s, "share": share, "weighting": w} for s, share, w in sources if share > 0]
