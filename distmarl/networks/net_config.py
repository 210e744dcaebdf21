"""``net_config`` in AgileRL's form, resolved to one complete config per agent.

A config for one network::

    {"latent_dim": 32,
     "encoder_config": {"hidden_size": [64], "activation": "ReLU", "min_hidden_layers": 1,
                        "max_hidden_layers": 3, "min_mlp_nodes": 16, "max_mlp_nodes": 500,
                        "layer_norm": False, "output_vanish": True},
     "head_config": {...same keys...}}

It comes in three forms (AgileRL's):

1. one config for every agent: the dict above;
2. one per group: ``{"bob": {...}, "fred": {...}}`` for agents ``bob_0, bob_1, fred_0`` (groups as
   :mod:`distmarl.agents` defines them: ``bob_0`` -> ``bob``);
3. one per agent: ``{"bob_0": {...}, "bob_1": {...}}``.

Groups and agents may be mixed as long as each agent is covered exactly once. Unknown keys, config
keys mixed with agent/group keys, an agent covered twice or not at all: :class:`NetConfigError`,
whose message lists the env's agents and groups.

``channels_last`` (true / false; left out: guessed, see
:func:`~distmarl.networks.inputs.guess_channels_last`) says how a rank-3 image observation is
laid out, in any of the three forms (``{"white": {"channels_last": true}}``). It decides how the
observation is read, so :func:`channels_last_of` reads it before any network is configured and
the completed configs leave it out.

One deliberate difference from AgileRL: ``layer_norm`` defaults to False (AgileRL: True), because
LayerNorm renormalises a layer when it grows, so no added layer or node could preserve outputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from distmarl.agents import agent_groups, group_of
from distmarl.networks.cnn_config import (
    CNN_ONLY_KEYS,
    CNNConfigError,
    complete_cnn_config,
    default_layers,
)
from distmarl.networks.inputs import DictInput, ImageInput, InputSpec
from distmarl.networks.mlp import ACTIVATIONS

#: A complete per-agent config: ``latent_dim`` plus full ``encoder_config`` / ``head_config``.
AgentNetConfig = dict[str, Any]

NET_CONFIG_KEYS: tuple[str, ...] = ("latent_dim", "encoder_config", "head_config",
                                    "channels_last")
DEFAULT_LATENT_DIM = 32
DEFAULT_MLP_CONFIG: dict[str, Any] = {
    "hidden_size": [64],
    "activation": "ReLU",
    "min_hidden_layers": 1,
    "max_hidden_layers": 3,
    "min_mlp_nodes": 16,
    "max_mlp_nodes": 500,
    "layer_norm": False,
    "output_vanish": True,
}


class NetConfigError(ValueError):
    """A ``net_config`` that does not fit the env's agents, or an invalid value in it."""


def resolve_net_config(
    net_config: Mapping[str, Any] | None, agents: Sequence[str],
    inputs: Mapping[str, InputSpec] | None = None,
) -> dict[str, AgentNetConfig]:
    """One complete, validated config per agent (a fresh copy each; defaults filled in).

    ``inputs`` (what each agent observes; default: vectors) decides each ``encoder_config``'s
    kind: an MLP's for vectors, a CNN's for images, ``mlp_config`` and ``cnn_config`` for dicts.
    """
    agents = list(agents)
    inputs = inputs or {}
    raw = dict(net_config or {})
    config_keys = [k for k in raw if k in NET_CONFIG_KEYS]
    other_keys = [k for k in raw if k not in NET_CONFIG_KEYS]
    if not other_keys:
        return {a: complete_net_config(raw, "net_config", inputs.get(a), a) for a in agents}
    if config_keys:
        raise NetConfigError(_explain(
            f"net_config mixes network keys {config_keys} with agent/group keys {other_keys}; "
            "use either one config for all agents or one per agent/group", agents))
    return {a: complete_net_config(raw[k], f"net_config[{k!r}]", inputs.get(a), a)
            for a, k in _keys_per_agent(raw, agents).items()}


def _keys_per_agent(raw: Mapping[str, Any], agents: list[str]) -> dict[str, str]:
    """Agent -> the key of ``raw`` that configures it (exactly one)."""
    groups = agent_groups(agents)
    unknown = [k for k in raw if k not in agents and k not in groups]
    if unknown:
        raise NetConfigError(_explain(f"net_config keys {unknown} match no agent or group", agents))
    chosen: dict[str, str] = {}
    for a in agents:
        keys = sorted({k for k in (a, group_of(a)) if k in raw})
        if len(keys) > 1:
            raise NetConfigError(_explain(
                f"agent {a!r} is configured twice (by {keys}); keep one of them", agents))
        if not keys:
            raise NetConfigError(_explain(
                f"net_config has no entry for agent {a!r} (nor its group {group_of(a)!r})", agents))
        chosen[a] = keys[0]
    return chosen


def channels_last_of(net_config: Mapping[str, Any] | None, agents: Sequence[str]
                     ) -> dict[str, bool | None]:
    """Each agent's ``channels_last`` (None: not given, the layout is guessed), from the config
    that covers it: the one config, or its agent's key, or its group's. Keys that cover no agent
    are left for :func:`resolve_net_config` to report."""
    raw = dict(net_config or {})
    if all(k in NET_CONFIG_KEYS for k in raw):
        return dict.fromkeys(agents, _channels_last(raw, "net_config"))
    out: dict[str, bool | None] = {}
    for a in agents:
        key = a if a in raw else group_of(a)
        cfg = raw.get(key)
        out[a] = _channels_last(cfg, f"net_config[{key!r}]") if isinstance(cfg, Mapping) else None
    return out


def _channels_last(cfg: Mapping[str, Any], where: str) -> bool | None:
    value = cfg.get("channels_last")
    if value is not None and not isinstance(value, bool):
        raise NetConfigError(f"{where}['channels_last'] must be true or false (left out: guessed "
                             f"from the shape), got {value!r}")
    return value


def _explain(message: str, agents: list[str]) -> str:
    return f"{message}. The env's agents: {agents}; groups: {list(agent_groups(agents))}."


def complete_net_config(cfg: Any, where: str, observed: InputSpec | None = None,
                        agent: str | None = None) -> AgentNetConfig:
    """Validate one network config for an agent observing ``observed`` (default: a vector) and
    fill in defaults."""
    if not isinstance(cfg, Mapping):
        raise NetConfigError(f"{where} must be a dict, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(NET_CONFIG_KEYS))
    if unknown:
        raise NetConfigError(f"{where}: unknown keys {unknown}; allowed: {list(NET_CONFIG_KEYS)}")
    latent = cfg.get("latent_dim", DEFAULT_LATENT_DIM)
    if not isinstance(latent, int) or isinstance(latent, bool) or latent <= 0:
        raise NetConfigError(f"{where}['latent_dim'] must be a positive int, got {latent!r}")
    _channels_last(cfg, where)
    return {
        "latent_dim": latent,
        "encoder_config": complete_encoder_config(
            cfg.get("encoder_config"), f"{where}['encoder_config']", observed, agent),
        "head_config": complete_mlp_config(cfg.get("head_config"), f"{where}['head_config']"),
    }


def complete_encoder_config(cfg: Any, where: str, observed: InputSpec | None,
                            agent: str | None = None) -> dict[str, Any]:
    """An ``encoder_config`` of the kind the observation needs, validated and completed."""
    if cfg is not None and not isinstance(cfg, Mapping):
        raise NetConfigError(f"{where} must be a dict, got {type(cfg).__name__}")
    cfg = dict(cfg or {})
    kind = given_kind(cfg)
    who = f"agent {agent!r}" if agent else "the agent"
    if observed is None or not isinstance(observed, (ImageInput, DictInput)):
        if kind in ("cnn", "multi"):
            raise NetConfigError(f"{where} configures an image encoder ({sorted(cfg)}), but "
                                 f"{who} observes a vector: give MLP keys {list(DEFAULT_MLP_CONFIG)}")
        return complete_mlp_config(cfg, where)
    images = [observed] if isinstance(observed, ImageInput) else [
        p for _, p in observed.parts if isinstance(p, ImageInput)]
    if kind == "mlp" and images:
        raise NetConfigError(
            f"{who} observes an {images[0].describe()}, but {where} is an MLP config "
            f"({sorted(cfg)}): set a CNN config, e.g. encoder_config: "
            f"{suggested_cnn(images)}, or leave encoder_config out for the "
            "default CNN" + (" (a dict observation takes {cnn_config: ..., mlp_config: ...})"
                             if isinstance(observed, DictInput) else ""))
    try:
        if isinstance(observed, ImageInput):
            if kind == "multi":
                raise NetConfigError(f"{where}: {who} observes one image, not a dict: give the "
                                     "CNN keys directly instead of cnn_config / mlp_config")
            return complete_cnn_config(cfg, where, observed)
        cnn_cfg = cfg if kind == "cnn" else cfg.get("cnn_config")
        mlp_cfg = cfg if kind == "mlp" else cfg.get("mlp_config")
        return {"kind": "multi", "mlp_config": complete_mlp_config(mlp_cfg, f"{where}['mlp_config']"),
                "cnn_config": {k: complete_cnn_config(cnn_cfg, f"{where}['cnn_config']", p)
                               for k, p in observed.parts if isinstance(p, ImageInput)}}
    except CNNConfigError as e:
        raise NetConfigError(str(e)) from e


def suggested_cnn(images: Sequence[ImageInput]) -> str:
    """Conv layers that fit every image of ``images`` (the default layers of the smallest), as
    YAML flow: ``{channel_size: [32, 32], kernel_size: [3, 3], stride_size: [1, 1]}``."""
    smallest = min(images, key=lambda im: min(im.chw[1:]))
    layers = default_layers(smallest)
    return "{" + ", ".join(f"{k}: {v}" for k, v in layers.items()) + "}"


def given_kind(cfg: Mapping[str, Any]) -> str:
    """What an ``encoder_config`` configures by its keys: ``none`` (empty), ``multi``
    (``cnn_config`` / ``mlp_config``), ``cnn`` (any CNN-only key) or ``mlp``."""
    if not cfg:
        return "none"
    if set(cfg) <= {"cnn_config", "mlp_config"}:
        return "multi"
    return "cnn" if set(cfg) & CNN_ONLY_KEYS else "mlp"


def complete_mlp_config(cfg: Any, where: str) -> dict[str, Any]:
    """Validate an ``encoder_config`` / ``head_config`` and fill in defaults."""
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, Mapping):
        raise NetConfigError(f"{where} must be a dict, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(DEFAULT_MLP_CONFIG))
    if unknown:
        raise NetConfigError(f"{where}: unknown keys {unknown}; allowed: {list(DEFAULT_MLP_CONFIG)}")
    out = {**copy.deepcopy(DEFAULT_MLP_CONFIG), **copy.deepcopy(dict(cfg))}
    out["hidden_size"] = _int_list(out["hidden_size"], f"{where}['hidden_size']")
    for key in ("min_hidden_layers", "max_hidden_layers", "min_mlp_nodes", "max_mlp_nodes"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 1:
            raise NetConfigError(f"{where}['{key}'] must be an int >= 1, got {out[key]!r}")
    if out["activation"] not in ACTIVATIONS:
        raise NetConfigError(f"{where}['activation']={out['activation']!r}; choose from {list(ACTIVATIONS)}")
    _check_bounds(out, where)
    return out


def _int_list(value: Any, where: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise NetConfigError(f"{where} must be a list of ints, got {value!r}")
    return list(value)


def _check_bounds(cfg: dict[str, Any], where: str) -> None:
    hidden = cfg["hidden_size"]
    lo_l, hi_l, lo_n, hi_n = (cfg["min_hidden_layers"], cfg["max_hidden_layers"],
                              cfg["min_mlp_nodes"], cfg["max_mlp_nodes"])
    if lo_l > hi_l or lo_n > hi_n:
        raise NetConfigError(f"{where}: min bounds exceed max bounds ({cfg})")
    if not lo_l <= len(hidden) <= hi_l:
        raise NetConfigError(
            f"{where}['hidden_size']={hidden} has {len(hidden)} layers, outside [{lo_l}, {hi_l}]")
    if any(not lo_n <= h <= hi_n for h in hidden):
        raise NetConfigError(f"{where}['hidden_size']={hidden} has sizes outside [{lo_n}, {hi_n}]")
