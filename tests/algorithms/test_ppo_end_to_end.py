"""IPPO learns a little on mpe2 simple_spread_v3 in the single-process loop (seeded, so the
outcome is reproducible; ~25 s on a free core)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest


@pytest.mark.slow
def test_ippo_improves_on_simple_spread() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from single_process_onpolicy import DEFAULT_CONFIG, train_member

    from distmarl.config import config_from_dict

    cfg = config_from_dict({**DEFAULT_CONFIG, "algorithm": {
        **DEFAULT_CONFIG["algorithm"], "hp": {"learn_step": 128, "batch_size": 256, "lr": 1e-3}}})
    result = train_member(cfg, steps=24 * 1024, seed=0, log=False)
    scores = [s for _, s in result["train_scores"]]  # mean episode score per fragment
    assert len(scores) == 24
    first, last = np.mean(scores[:3]), np.mean(scores[-4:])
    # a random policy scores about -78 here (uniform actions, measured over 200 episodes)
    assert last > first + 5, (first, last)
