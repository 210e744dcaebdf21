"""Every shipped example config loads and passes the pre-flight checks a run would do."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.config import load_config
from distmarl.factory import preflight
from distmarl.league.setup import league_setup

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "examples" / "configs").glob("*.yaml"))


def test_the_issue_s_example_configs_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {"speaker_listener_maddpg.yaml", "speaker_listener_matd3.yaml",
            "spread_maddpg.yaml"} <= names, names


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_example_config_passes_preflight(path: Path) -> None:
    cfg = load_config(path)
    obs_spaces, act_spaces, state = preflight(cfg)
    assert set(obs_spaces) == set(act_spaces) and len(obs_spaces) >= 2
    assert cfg.population.size >= 2 and cfg.training.max_steps_per_member > 0
    if cfg.league.enabled:  # sides and references fit the game
        setup = league_setup(cfg, (obs_spaces, act_spaces, state))
        assert setup is not None and len(setup.references) >= 2


#: What the AgileRL-settings speaker-listener config changes against the main one.
AGILERL_OVERRIDES = ["name=speaker_listener_maddpg_agilerl", "algorithm.hp.batch_size=64",
                     "algorithm.hp.learn_step=16", "algorithm.hp.max_grad_norm=0",
                     "algorithm.hp.actor_reg=0", "evolution.evo_steps=10000",
                     "evolution.eval_episodes=1", "evolution.mutation.architecture=0.2",
                     "evolution.mutation.parameters=0.2", "training.max_steps_per_member=60000",
                     "replay.prioritized_replay=false", "replay.n_step=1"]


def test_agilerl_config_is_the_main_one_with_agilerl_s_example_settings() -> None:
    configs = {p.name: p for p in CONFIGS}
    agilerl = load_config(configs["speaker_listener_maddpg_agilerl.yaml"])
    main = load_config(configs["speaker_listener_maddpg.yaml"], AGILERL_OVERRIDES)
    assert agilerl.model_dump() == main.model_dump()
    assert (agilerl.algorithm.hp.learn_step, agilerl.algorithm.hp.batch_size) == (16, 64)
