"""Reading a config: YAML, ``base:`` composition, ``--set`` overrides, validation, errors.

A config file may name another with ``base: other.yaml`` (a path relative to the file): the
base is read first (recursively; a cycle is an error naming the files), then the file's own
keys are merged into it, a mapping key by key at every depth, anything else replaced. The
``--set key.path=value`` overrides come last and parse their value as YAML
(``--set buffer.capacity=50000``, ``--set algorithm.hp.lr_actor=1e-3``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from distmarl.config.evolution import EVOLUTION_MODES, keys_of_mode
from distmarl.config.experiment import ALGORITHM_CONFIGS, ExperimentConfig
from distmarl.config.hparams import HP_MODELS, on_policy
from distmarl.config.section import UNKNOWN_KEY, ConfigError

#: The key that names a config's base file.
BASE_KEY = "base"


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e-3`` as a string; configs mean a float (as YAML 1.2 and JSON do)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|[-+]?[0-9][0-9_]*\.[0-9_]*)$"""),
    list("-+0123456789."),
)


def yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Set ``a.b.c=value`` items (value parsed as YAML) in a nested dict, in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got '{item}'")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: '{part}' is not a section")
            node = child
        node[parts[-1]] = yaml_load(raw)
        if parts == ["evolution", "mode"]:  # the old mode's keys go with it
            data["evolution"] = keys_of_mode(data["evolution"], data["evolution"]["mode"])
        if parts == ["algorithm", "name"]:  # and the old family's replay settings
            _drop_replay_for(data, data["algorithm"]["name"])
    return data


def _drop_replay_for(data: dict[str, Any], algorithm: Any) -> None:
    """``data`` without its ``replay`` section when ``algorithm`` reads its own fragments (a
    file or ``--set`` switched a replaying base to it)."""
    if isinstance(algorithm, str) and algorithm in HP_MODELS and on_policy(algorithm):
        data.pop("replay", None)


def deep_merge(base: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``own``'s keys winning: mappings merged key by key, other values
    (lists included) replaced. Neither argument changes."""
    out = dict(base)
    for key, value in own.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


#: the sections that are one of several models, by the key that chooses: its choices
UNION_SECTIONS: dict[str, tuple[str, Mapping[str, Any]]] = {
    "algorithm": ("name", ALGORITHM_CONFIGS), "evolution": ("mode", EVOLUTION_MODES)}


def _error_location(error: Mapping[str, Any]) -> str:
    """The dotted path of a validation error: a union section's tag left out
    (``algorithm.hp.lr``, not ``algorithm.IPPO.hp.lr``), an unknown key added."""
    loc = [str(p) for p in error["loc"] if p != "function-after"]
    if len(loc) > 1 and loc[0] in UNION_SECTIONS and loc[1] in UNION_SECTIONS[loc[0]][1]:
        del loc[1]
    if error["type"] == UNKNOWN_KEY:
        loc.append(error["ctx"]["key"])
    if error["type"] == "union_tag_invalid" and loc and loc[-1] in UNION_SECTIONS:
        loc.append(UNION_SECTIONS[loc[-1]][0])
    return ".".join(loc)


def _error_message(error: Mapping[str, Any]) -> str:
    if error["type"] == "union_tag_invalid":
        loc = [str(p) for p in error["loc"]]
        key, choices = UNION_SECTIONS[loc[-1] if loc and loc[-1] in UNION_SECTIONS
                                      else "algorithm"]
        what = "algorithm" if key == "name" else "evolution mode"
        known = sorted(str(c) for c in choices)
        return f"unknown {what} '{error['ctx']['tag']}'; choose one of {known}"
    return str(error["msg"]).removeprefix("Value error, ")


#: the longest offending value an error line repeats (``got ...``); longer ones are left out
SHOWN_VALUE_CHARS = 80


def _shown_value(value: Any) -> str:
    """`` (got value)`` for a plain value of a field; nothing for a section or a whole config
    (a check across fields names its fields and values in its message) or a long value."""
    if value is None or isinstance(value, Mapping | BaseModel):
        return ""
    text = repr(value)
    return "" if len(text) > SHOWN_VALUE_CHARS else f" (got {text})"


def format_error(err: ValidationError, source: str) -> str:
    """One line per problem, ending at the problem: ``  path.to.field: what is wrong (got
    value)``; a check across sections gives its own message, which names the fields."""
    lines = []
    for e in err.errors():
        where = _error_location(e)
        lines.append(f"  {where + ': ' if where else ''}{_error_message(e)}"
                     f"{_shown_value(e.get('input'))}")
    return f"invalid config {source}:\n" + "\n".join(lines)


def config_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(format_error(err, source)) from None


def read_config_data(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The raw mapping of the config file ``path`` with its ``base:`` chain merged in.
    ``chain`` holds the files that led here (each one's base is the next), for cycles and
    error messages."""
    if not path.exists():
        by = f" (the base of {chain[-1]})" if chain else ""
        raise ConfigError(f"config file {path}{by} does not exist")
    if path.resolve() in {p.resolve() for p in chain}:
        files = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"config files form a cycle of base: keys: {files}")
    try:
        data = yaml_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"config file {path}: base must be a file path, got {base!r}")
    under = read_config_data(path.parent / base, (*chain, path))
    evolution = data.get("evolution")
    mode = evolution.get("mode") if isinstance(evolution, Mapping) else None
    if mode is not None and isinstance(under.get("evolution"), Mapping):
        under["evolution"] = keys_of_mode(under["evolution"], mode)  # the base's mode's go
    algorithm = data.get("algorithm")
    if isinstance(algorithm, Mapping):
        _drop_replay_for(under, algorithm.get("name"))
    return deep_merge(under, data)


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read a YAML config (with its ``base:`` files), apply ``--set`` overrides, validate."""
    path = Path(path)
    return config_from_dict(apply_overrides(read_config_data(path), overrides), str(path))
