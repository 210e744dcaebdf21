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
