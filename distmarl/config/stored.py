"""A config as a checkpoint stored it, read by today's schema.

A checkpoint keeps its run's whole config as plain data, every field written out. Fields the
schema has since replaced are translated, so an older run's members can still be loaded and
scored (``distmarl evaluate``):

- ``league.current_share`` / ``reference_share`` / ``pfsp`` / ``reference_pfsp`` (positional
  opponent shares) become the ``league.opponents`` list that draws the same opponents;
  ``self_share`` goes (self-play by share is no longer offered);
- an ``evolution.hp_config`` range's ``dtype`` is dropped, to be inferred again from its
  hyperparameter's type (an integer one stored as ``float`` would be refused);
- ``evolution`` keeps the keys of its mode only (one section held every mode's keys);
- the replay settings written in ``buffer`` and ``training`` move to ``replay`` for members
  that replay, and go for those that do not (every run wrote them out);
- a ``replay_ratio`` of 0 (it meant: a batch of new rows only) reads as the smallest ratio,
  :data:`~distmarl.config.replay.STORED_STREAM_RATIO`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from distmarl.config.evolution import keys_of_mode
from distmarl.config.experiment import (
    ALGORITHM_CONFIGS,
    DEFAULT_ALGORITHM,
    MOVED_TO_REPLAY,
    ExperimentConfig,
    TrackingConfig,
)
from distmarl.config.hparams import on_policy
from distmarl.config.replay import stored_hp, stored_ratio

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
    _move_replay_keys(out)
    _ratios_of_zero(out)
    _renamed_keys(out)
    return ExperimentConfig.model_validate(out)


def _renamed_keys(out: dict[str, Any]) -> None:
    """The tracking section's keys of its ``RENAMED`` under their new names, quietly: every
    checkpoint of a run before the rename holds them (a user's config is warned, and so is a
    stored ``training.max_steps``)."""
    tracking = out.get("tracking")
    if not isinstance(tracking, dict):
        return
    for old, new in TrackingConfig.RENAMED.items():
        if old in tracking and new not in tracking:
            tracking[new] = tracking.pop(old)


def _move_replay_keys(out: dict[str, Any]) -> None:
    """The replay keys of ``buffer`` / ``training`` (before they had their own section) into
    ``replay`` for a replaying algorithm, dropped for one that reads its own fragments."""
    algorithm = (out.get("algorithm") or {}).get("name", DEFAULT_ALGORITHM)
    replays = not on_policy(algorithm) if algorithm in ALGORITHM_CONFIGS else True
    for old, new in MOVED_TO_REPLAY.items():
        section, key = old.split(".")
        if not isinstance(out.get(section), dict) or key not in out[section]:
            continue
        value = out[section].pop(key)
        if replays and value is not None:  # (a null: the field's default, the family's)
            out.setdefault("replay", {})[new.split(".")[1]] = value


def _ratios_of_zero(out: dict[str, Any]) -> None:
    """Every stored ``replay_ratio`` of 0 (a batch of new rows only, when 0 meant that) read
    as :func:`stored_ratio` says: the replay section's, the members' and the search range's."""
    if isinstance(out.get("replay"), dict) and "replay_ratio" in out["replay"]:
        out["replay"]["replay_ratio"] = stored_ratio(out["replay"]["replay_ratio"])
    algorithm = out.get("algorithm")
    if isinstance(algorithm, dict) and isinstance(algorithm.get("hp"), dict):
        algorithm["hp"] = stored_hp(algorithm["hp"])
    for group in (out.get("population") or {}).get("members") or []:
        if isinstance(group, dict) and isinstance(group.get("hp"), dict):
            group["hp"] = stored_hp(group["hp"])
    spec = ((out.get("evolution") or {}).get("hp_config") or {}).get("replay_ratio")
    if isinstance(spec, dict):
        spec.update({k: stored_ratio(spec[k]) for k in ("min", "max") if k in spec})


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
