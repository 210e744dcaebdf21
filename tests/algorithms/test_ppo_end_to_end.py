"""IPPO learns a little on mpe2 simple_spread_v3 in the single-process trainer (seeded, so the
outcome is reproducible; ~17 s on a free core)."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.config import config_from_dict
from distmarl.reference import SPREAD_IPPO, train_on_policy


@pytest.mark.slow
def test_ippo_improves_on_simple_spread() -> None:
    cfg = config_from_dict({**SPREAD_IPPO, "algorithm": {
        **SPREAD_IPPO["algorithm"], "hp": {"learn_step": 128, "batch_size": 256, "lr": 1e-3}}})
    result = train_on_policy(cfg, steps=16 * 1024, seed=0, log=False)
    assert result.env_steps == 16 * 1024 and result.updates == 16
    scores = [s for _, s in result.train_scores]  # mean episode score per fragment
    assert len(scores) == 16
    first, last = np.mean(scores[:3]), np.mean(scores[-4:])
    # a random policy scores about -78 here (uniform actions, measured over 200 episodes)
    assert last > first + 5, (first, last)
