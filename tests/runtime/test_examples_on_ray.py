"""Every example config trains on Ray as it does in process (``test_local_fleet``): a release
check, minutes long on 2 cores, so it runs where ``DISTMARL_EXAMPLES_ON_RAY=1`` is set:

    DISTMARL_EXAMPLES_ON_RAY=1 bash scripts/test.sh tests/runtime/test_examples_on_ray.py
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from distmarl.runtime.driver.trainer import train
from tests.runtime.test_local_fleet import CONFIGS, assert_trained, shortened

pytestmark = [
    pytest.mark.ray, pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("DISTMARL_EXAMPLES_ON_RAY") != "1",
                       reason="a release check: set DISTMARL_EXAMPLES_ON_RAY=1 to run it")]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_example_config_trains_on_ray(path: Path, tmp_path: Path, ray_local: Any) -> None:
    """Every example, shortened, on the suite's Ray, with two members per learner where the
    population has more (stacks of members, rollout workers acting with policies)."""
    cfg = shortened(path, tmp_path, "population.members_per_learner=2")
    assert_trained(cfg, train(cfg, run_dir=tmp_path / "run", show_progress=False,
                              dashboard=False))
