"""Scoring a saved member from a checkpoint (no Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from distmarl.checkpoint import load_checkpoint
from distmarl.config import ExperimentConfig
from distmarl.factory import env_spaces, make_algorithm, make_venv
from distmarl.rollout import evaluate


def evaluate_checkpoint(path: Path, episodes: int = 10, member: int | None = None,
                        seed: int = 0) -> dict[str, Any]:
    """Mean score of ``episodes`` episodes of a member (default: the best by last fitness)."""
    ckpt = load_checkpoint(path, with_buffer=False)
    cfg = ExperimentConfig.model_validate(ckpt.meta["config"])
    fitness = [m["fitness"][-1] if m["fitness"] else float("-inf") for m in ckpt.meta["members"]]
    slot = int(np.argmax(fitness)) if member is None else member
    if not 0 <= slot < len(ckpt.members):
        raise ValueError(f"--member {slot} is not a member of {ckpt.path} (0..{len(ckpt.members) - 1})")
    algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=seed)
    algo.load_state_dict(ckpt.members[slot]["algo"])
    venv = make_venv(cfg.env, num_envs=1, mode="sync", seed=seed)
    try:
        scores = evaluate(venv, algo, episodes=episodes, seed=seed)
    finally:
        venv.close()
    return {"checkpoint": str(ckpt.path), "member": slot, "episodes": len(scores),
            "mean_score": float(np.mean(scores)), "std_score": float(np.std(scores))}
