"""Configs as older checkpoints stored them load with today's schema: the positional league
shares become the opponents list drawing the same, a stored range dtype is inferred again, an
evolution section holding every mode's keys keeps its mode's, the replay keys written in
``buffer`` and ``training`` move to ``replay``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from distmarl.config.stored import stored_config

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"


def dumped(name: str) -> dict:
    return json.loads(load_config(CONFIGS / name).model_dump_json())


def test_positional_league_shares_become_the_opponents_list() -> None:
    data = dumped("tictactoe_ippo_league.yaml")
    data["league"].pop("opponents")
    data["league"] |= {"current_share": 0.5, "reference_share": 0.25, "pfsp": "variance",
                       "reference_pfsp": "uniform", "self_share": 0.0}
    league = stored_config(data).league
    assert [(o.source, o.share, o.weighting) for o in league.opponents] == [
        ("reference", 0.25, "uniform"), ("current", 0.375, "variance"),
        ("snapshot", 0.375, "variance")]


def test_without_references_the_old_default_is_the_new_default() -> None:
    data = dumped("tictactoe_ippo_league.yaml")
    data["league"].pop("opponents")
    data["league"] |= {"current_share": 0.5, "reference_share": 0.0, "pfsp": "hard"}
    assert stored_config(data).league == load_config(
        CONFIGS / "tictactoe_ippo_league.yaml",
        ["league.opponents=[{source: current, share: 0.5}, {source: snapshot, share: 0.5}]"],
    ).league


def test_a_stored_float_dtype_of_an_integer_range_is_inferred_again() -> None:
    data = dumped("tiny.yaml")
    data["evolution"]["hp_config"]["batch_size"]["dtype"] = "float"
    with pytest.raises(ConfigError, match="batch_size"):  # today's schema refuses it as stored
        load_config(CONFIGS / "tiny.yaml", ["evolution.hp_config.batch_size.dtype=float"])
    assert stored_config(data).evolution.hp_config["batch_size"].dtype == "int"


def test_a_stored_replay_ratio_of_zero_reads_as_the_smallest_ratio() -> None:
    """0 meant "a batch of new rows only" and is no ratio today: stored in the buffer
    section, a member's hyperparameters, a search range or a member's state, it reads as
    the smallest ratio, whose batches are still all new rows."""
    from distmarl.config.replay import STORED_STREAM_RATIO
    from distmarl.runtime.logic.run_state import MemberState

    data = dumped("speaker_listener_maddpg.yaml")
    data.pop("replay")
    data["buffer"]["replay_ratio"] = 0.0
    data["algorithm"]["hp"]["replay_ratio"] = 0
    data["evolution"]["hp_config"]["replay_ratio"] = {"min": 0.0, "max": 0.5}
    cfg = stored_config(data)
    assert cfg.replay is not None and cfg.replay.replay_ratio == STORED_STREAM_RATIO
    assert cfg.algorithm.hp.replay_ratio == STORED_STREAM_RATIO
    assert cfg.evolution.hp_config["replay_ratio"].min == STORED_STREAM_RATIO
    member = MemberState(member=0, boundary=0, hp={"replay_ratio": 0.0, "learn_step": 5})
    back = MemberState.from_json(member.to_json())
    assert back.hp == {"replay_ratio": STORED_STREAM_RATIO, "learn_step": 5}
    from distmarl.factory import env_spaces, make_algorithm

    algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=0)
    state = algo.state_dict()
    state["hp"]["replay_ratio"] = 0.0
    algo.load_state_dict(state)
    assert algo.hp["replay_ratio"] == STORED_STREAM_RATIO


STORED = Path(__file__).resolve().parent / "data" / "stored_configs"


@pytest.mark.parametrize("name", sorted(p.stem for p in STORED.glob("*.json")))
def test_a_config_stored_when_one_section_held_every_modes_keys_loads_as_its_example(
        name: str) -> None:
    """Each example config as checkpoints stored it before ``evolution`` became one model per
    mode (every mode's keys written out): it loads, quietly, as the example loads today."""
    import warnings

    data = json.loads((STORED / f"{name}.json").read_text())
    assert {"tournament", "bottom_frac", "migration_frac"} <= set(data["evolution"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stored = stored_config(data)
    assert stored == load_config(CONFIGS / f"{name}.yaml")
