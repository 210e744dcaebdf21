"""Does a config fit the checkpoint it resumes? Checked from the checkpoint's JSON files
(manifest and meta) before Ray starts, so a mismatch is a config error in a moment rather than
a failed actor call a minute in.

What loading a checkpoint needs of the config: as many members; each member's algorithm (a
population that converts members rebuilds a learner for whatever the checkpoint holds); the
same agents with the same observation and action spaces (the networks' shapes); a league where
the config has one; as many replay shards as the checkpoint's buffer has. Everything else (hyperparameters, budgets, cadences) may change on a resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distmarl.checkpoint import CheckpointError, is_buffer_file, list_checkpoints, read_meta
from distmarl.config import ConfigError, ExperimentConfig


def check_resume(run_dir: Path, cfg: ExperimentConfig, spaces: dict[str, dict[str, str]],
                 league: bool) -> Path:
    """The checkpoint folder a resume of ``run_dir`` loads (its latest), after checking that
    ``cfg`` fits it: ``spaces`` are the env's (:func:`agent_spaces`), ``league`` whether the
    config plays one. A :class:`ConfigError` lists every mismatch, one line each, naming the
    field and both values."""
    root = run_dir / "checkpoints"
    if not list_checkpoints(root):
        raise FileNotFoundError(f"--resume {run_dir}: no checkpoint under {root}")
    try:
        path, manifest, meta = read_meta(root)
    except CheckpointError as err:
        raise ConfigError(f"--resume {run_dir}: {err}") from None
    problems = [*_members(cfg, int(manifest["members"])), *_algorithms(cfg, meta),
                *_env(cfg, meta, spaces), *_shards(cfg, manifest)]
    if league and "league" not in meta:
        problems.append("league: the config plays a league, the checkpoint is of a run "
                        "without one")
    if problems:
        raise ConfigError(f"--resume {run_dir}: the config does not fit checkpoint "
                          f"{path.name}:\n" + "\n".join(f"  {p}" for p in problems))
    return path


def _members(cfg: ExperimentConfig, saved: int) -> list[str]:
    if saved == cfg.num_members:
        return []
    per_side = "" if cfg.num_members == cfg.population.size else (
        f" ({cfg.population.size} per side x {cfg.num_members // cfg.population.size} sides)")
    return [f"population.size: the checkpoint has {saved} members, the config "
            f"{cfg.num_members}{per_side}"]


def _shards(cfg: ExperimentConfig, manifest: Mapping[str, Any]) -> list[str]:
    """The buffer's shards, where the checkpoint holds a buffer and the config counts its
    shards (``auto`` is counted when the fleet starts, which checks it then)."""
    saved = sum(1 for name in manifest.get("files", {}) if is_buffer_file(name))
    wanted = cfg.buffer.shards
    if not saved or not isinstance(wanted, int) or saved == wanted:
        return []
    return [f"buffer.shards: the checkpoint's buffer has {saved} shards, the config {wanted}"]


def _algorithms(cfg: ExperimentConfig, meta: Mapping[str, Any]) -> list[str]:
    """Members whose algorithm differs (none where the population converts members)."""
    if cfg.population.cross_algorithm == "convert":
        return []
    wanted = [a.name for a in cfg.member_algorithm_configs()]
    saved = [str(m.get("algorithm", "")) for m in meta.get("members", [])]
    differ = [i for i, (s, w) in enumerate(zip(saved, wanted)) if s and s != w]
    if not differ:
        return []
    field = "algorithm.name" if cfg.population.members is None else "population.members"
    pairs = ", ".join(f"member {i} {saved[i]} (config {wanted[i]})" for i in differ)
    return [f"{field}: the checkpoint's members run other algorithms: {pairs}"]


def _env(cfg: ExperimentConfig, meta: Mapping[str, Any],
         spaces: dict[str, dict[str, str]]) -> list[str]:
    """Agents and spaces that differ; a checkpoint that recorded none is checked by env spec."""
    saved = meta.get("agent_spaces")
    if saved is None:
        spec = meta.get("config", {}).get("env", {}).get("spec")
        if spec is not None and spec != cfg.env.spec:
            return [f"env.spec: the checkpoint's run played {spec}, the config {cfg.env.spec}"]
        return []
    if list(saved) != list(spaces):
        return [f"env: the checkpoint's agents are {list(saved)}, the config's env has "
                f"{list(spaces)}"]
    return [f"env: agent {agent}'s {kind} space is {saved[agent][kind]} in the checkpoint, "
            f"{spaces[agent][kind]} in the config's env"
            for agent in spaces for kind in ("observation", "action")
            if saved[agent][kind] != spaces[agent][kind]]
