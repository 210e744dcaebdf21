"""Every shipped example config loads and passes the pre-flight checks a run would do."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.config import load_config
from distmarl.factory import preflight

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "examples" / "configs").glob("*.yaml"))


def test_the_issue_s_example_configs_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {"speaker_listener_maddpg.yaml", "speaker_listener_matd3.yaml",
            "spread_maddpg.yaml"} <= names, names


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_example_config_passes_preflight(path: Path) -> None:
    cfg = load_config(path)
    obs_spaces, act_spaces = preflight(cfg)
    assert set(obs_spaces) == set(act_spaces) and len(obs_spaces) >= 2
    assert cfg.population.size >= 2 and cfg.training.max_steps > 0
