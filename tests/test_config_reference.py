"""The config's reference: ``docs/config.md`` is what the models say now, every key has a
description, and the JSON Schema accepts every example config and refuses a misspelled key."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from distmarl.cli import main
from distmarl.config.reference import REGENERATE, json_schema, markdown

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted([*(ROOT / "examples" / "configs").glob("*.yaml"),
                  *(ROOT / "examples" / "your_env").glob("*.yaml")])


def test_docs_config_md_is_the_generated_reference() -> None:
    assert (ROOT / "docs" / "config.md").read_text() == markdown(), \
        f"docs/config.md is out of date: {REGENERATE}"


def test_every_key_has_a_type_and_a_description() -> None:
    rows = [line for line in markdown().splitlines() if line.startswith("| `")]
    assert len(rows) > 100
    for row in rows:
        key, kind, _, description = (c.strip() for c in row.strip("|").split(" | ", 3))
        assert kind and description, f"{key} lacks a type or a description"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_the_schema_accepts_every_example_config(path: Path) -> None:
    """Each file as written where it stands alone, merged with its base where it has one
    (the algorithm's name, which picks its hyperparameters, may come from the base)."""
    from distmarl.config.loading import read_config_data

    own = yaml.safe_load(path.read_text())
    jsonschema.validate(own if "base" not in own else read_config_data(path), json_schema())


def test_the_schema_refuses_a_misspelled_key_and_the_command_prints_it(capsys) -> None:
    with pytest.raises(jsonschema.ValidationError, match="evo_step"):
        jsonschema.validate({"evolution": {"evo_step": 100}}, json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"algorithm": {"name": "MADDPG", "hp": {"lr": 0.1}}}, json_schema())
    assert main(["config", "schema"]) == 0
    assert '"title": "distmarl experiment config"' in capsys.readouterr().out
