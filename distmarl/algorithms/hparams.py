"""Hyperparameters of the off-policy learners: AgileRL's names, defaults and checked values."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

#: MADDPG's hyperparameters and AgileRL's defaults. ``batch_size`` and ``learn_step`` are used by
#: whoever samples and schedules (the runtime), but live here so HPO mutates one dict. Two are
#: not AgileRL's but the original MADDPG code's stabilisers: ``max_grad_norm`` (clip each
#: network's gradient norm; 0 = off) and ``actor_reg`` (weight of an L2 penalty on the actor's
#: pre-tanh outputs / logits, which keeps them from saturating; 0 = off).
MADDPG_HP: dict[str, Any] = {
    "batch_size": 64,
    "lr_actor": 1e-3,
    "lr_critic": 1e-2,
    "learn_step": 5,
    "gamma": 0.95,
    "tau": 0.01,
    "O_U_noise": True,
    "expl_noise": 0.1,
    "mean_noise": 0.0,
    "theta": 0.15,
    "dt": 1e-2,
    "max_grad_norm": 0.0,
    "actor_reg": 0.0,
}
#: MATD3 adds delayed actor updates and target policy smoothing (TD3's ``policy_noise`` and
#: ``noise_clip``, in units of the action half-range).
MATD3_HP: dict[str, Any] = {**MADDPG_HP, "policy_freq": 2, "policy_noise": 0.2, "noise_clip": 0.5}

_INTS = {"batch_size", "learn_step", "policy_freq"}
_BOOLS = {"O_U_noise"}
_POSITIVE = {"lr_actor", "lr_critic", "tau", "dt"}
_UNIT = {"gamma", "tau"}  # within [0, 1]


def check_hyperparameters(defaults: Mapping[str, Any], hp: Mapping[str, Any] | None,
                          algorithm: str) -> dict[str, Any]:
    """``defaults`` overridden by ``hp``, every value checked; unknown names are an error."""
    out = dict(defaults)
    for name, value in (hp or {}).items():
        out[name] = check_hyperparameter(defaults, name, value, algorithm)
    return out


def check_hyperparameter(defaults: Mapping[str, Any], name: str, value: Any,
                         algorithm: str) -> Any:
    """The value as stored (ints stay ints), or ValueError saying what is wrong."""
    if name not in defaults:
        raise ValueError(f"{algorithm} has no hyperparameter {name!r}; it has {sorted(defaults)}")
    if name in _BOOLS:
        if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
            raise ValueError(f"{name} must be a bool, got {value!r}")
        return bool(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if name in _INTS:
        if float(value) != int(value) or int(value) < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        return int(value)
    value = float(value)
    if name in _POSITIVE and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if name in _UNIT and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1], got {value}")
    if name in ("expl_noise", "policy_noise", "noise_clip", "theta", "max_grad_norm",
                "actor_reg") and value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value
