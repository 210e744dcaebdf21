"""The config's reference, from its models: a JSON Schema for editors
(``distmarl config schema``) and the Markdown page ``docs/config.md``
(``distmarl config reference``), each key with its type, default and description.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from distmarl.config.evolution import EVOLUTION_MODES, EvolutionBase, SyncEvolution
from distmarl.config.experiment import (
    ExperimentConfig,
    IPPOConfig,
    MADDPGConfig,
    MAPPOConfig,
    MATD3Config,
)
from distmarl.config.loading import BASE_KEY
from distmarl.config.section import Section

ALGORITHM_CONFIGS = (MADDPGConfig, MATD3Config, IPPOConfig, MAPPOConfig)
BASE_DESCRIPTION = ("a config file this one extends (a path relative to this file): read "
                    "first, then merged key by key with this one")
REGENERATE = "python -m distmarl config reference > docs/config.md"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a config file (``base:`` included)."""
    schema = ExperimentConfig.model_json_schema()
    schema["properties"] = {BASE_KEY: {"type": "string", "description": BASE_DESCRIPTION},
                            **schema["properties"]}
    schema["title"] = "distmarl experiment config"
    return schema


def markdown() -> str:
    """``docs/config.md``: a table per section, ``algorithm.hp`` per algorithm."""
    out = ["# Config reference", "",
           "Every key of an experiment config, its type, default and meaning, generated from "
           f"the config's own descriptions (`{REGENERATE}`). Unknown keys are errors that name "
           "the closest key; `distmarl config show CONFIG` prints a config with every default "
           "filled in, and `distmarl config schema` prints this as a JSON Schema for editors.",
           "", "## Top level", "", *_table(_top_level())]
    for name, field in ExperimentConfig.model_fields.items():
        model = _section_of(field.annotation)
        if name == "algorithm":
            names = " | ".join(c.model_fields["name"].default for c in ALGORITHM_CONFIGS)
            first = ("algorithm.name", names, json.dumps("MADDPG"),
                     "the members' algorithm; its hyperparameters are below")
            out += ["", "## `algorithm`", "", *_table(iter([first, *_rows(
                MADDPGConfig, "algorithm.", skip={"name", "hp"})]))]
            for config in ALGORITHM_CONFIGS:
                hp = _section_of(config.model_fields["hp"].annotation)
                assert hp is not None
                label = config.model_fields["name"].default
                out += ["", f"### `algorithm.hp` of {label}", "",
                        *_table(_rows(hp, "algorithm.hp."))]
        elif name == "evolution":
            out += _evolution(field)
        elif model is not None:
            out += ["", f"## `{name}`", ""]
            if field.description:
                out += [_cell(field.description), ""]
            out += _table(_rows(model, f"{name}."))
    return "\n".join(out) + "\n"


def _evolution(field: FieldInfo) -> list[str]:
    """The common keys of every ``evolution.mode``, then each mode's own."""
    modes = " | ".join(EVOLUTION_MODES)
    first = ("evolution.mode", modes, json.dumps("sync"),
             SyncEvolution.model_fields["mode"].description or "")
    out = ["", "## `evolution`", "", _cell(field.description or ""), "",
           *_table(iter([first, *_rows(EvolutionBase, "evolution.", skip={"mode"})]))]
    common = set(EvolutionBase.model_fields)
    for mode, model in EVOLUTION_MODES.items():
        own = set(model.model_fields) - common
        if own:
            out += ["", f"### `evolution` keys of mode {mode}", "",
                    *_table(_rows(model, "evolution.", skip=common))]
    return out


def _top_level() -> Iterator[tuple[str, str, str, str]]:
    yield BASE_KEY, "str", "", BASE_DESCRIPTION
    for name, field in ExperimentConfig.model_fields.items():
        if _section_of(field.annotation) is None and name != "algorithm":
            yield name, _type(field.annotation), _default(field), field.description or ""


def _rows(model: type[BaseModel], prefix: str, skip: set[str] | None = None
          ) -> Iterator[tuple[str, str, str, str]]:
    """``(key, type, default, description)`` of every field, nested sections flattened."""
    for name, field in model.model_fields.items():
        if name in (skip or set()):
            continue
        nested = _section_of(field.annotation)
        if nested is not None and not _is_list_or_dict(field.annotation):
            yield from _rows(nested, f"{prefix}{name}.")
            continue
        yield f"{prefix}{name}", _type(field.annotation), _default(field), \
            field.description or ""


def _table(rows: Iterator[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {_cell(t)} | {_cell(d)} | {_cell(text)} |" for k, t, d, text in rows]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The Section model a field holds (itself, or in a list / dict / Optional), if any."""
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_of(arg)
        if found is not None:
            return found
    return None


def _is_list_or_dict(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return True
    return any(_is_list_or_dict(a) for a in typing.get_args(annotation)
               if typing.get_origin(a) is not None)


def _type(annotation: Any) -> str:
    """A short form of a field's type: ``int``, ``int | auto``, ``list[str]``, ``section``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type(a) for a in args)
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        return "" if isinstance(value, BaseModel) else json.dumps(_plain(value))
    if field.default is PydanticUndefined:
        return "required"
    return json.dumps(_plain(field.default))


def _plain(value: Any) -> Any:
    """A default as YAML would write it (sections as their dicts of values set)."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_defaults=False)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
