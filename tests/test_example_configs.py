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
    obs_spaces, act_spaces, _ = preflight(cfg)
    assert set(obs_spaces) == set(act_spaces) and len(obs_spaces) >= 2
    assert cfg.population.size >= 2 and cfg.training.max_steps > 0


#: What the tuned speaker-listener config changes against the main one; the README's
#: time-to-target figures were measured with the main config and these as ``--set`` overrides
#: (max_steps and target through the benchmark's own --max-steps / --time-to-target).
TUNED_OVERRIDES = ["name=speaker_listener_maddpg_tuned", "algorithm.hp.batch_size=256",
                   "algorithm.hp.learn_step=4", "algorithm.hp.max_grad_norm=0.5",
                   "algorithm.hp.actor_reg=0.001", "evolution.evo_steps=5000",
                   "training.max_steps=150000", "training.target=-30"]


def test_tuned_config_is_the_main_one_with_the_documented_overrides() -> None:
    configs = {p.name: p for p in CONFIGS}
    tuned = load_config(configs["speaker_listener_maddpg_tuned.yaml"])
    main = load_config(configs["speaker_listener_maddpg.yaml"], TUNED_OVERRIDES)
    assert tuned.model_dump() == main.model_dump()
    assert tuned.algorithm.hp.learn_step == 4 and tuned.training.target == -30.0
