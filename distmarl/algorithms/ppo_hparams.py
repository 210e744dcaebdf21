"""Hyperparameters of the on-policy learners (IPPO, MAPPO): AgileRL / skrl names, checked values.

``batch_size`` is the minibatch size of one gradient step; ``learn_step`` is the rollout fragment
length in *vectorised* steps (a fragment holds ``learn_step * num_envs`` transitions per agent),
used by whoever collects (the runtime, or the single-process loop). ``target_kl`` may be None
(no early stop), as in AgileRL. ``value_norm`` (MAPPO's value normalisation,
:mod:`distmarl.algorithms.onpolicy.value_norm`) and MAPPO's ``global_state`` (its value networks read the
env's ``env.state()`` where the env has one) are fixed when the learner is built.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

#: IPPO's and MAPPO's defaults: CleanRL's PPO values, with a fragment sized for 25-step MPE
#: episodes and 8 sub-envs (128 steps * 8 envs = 1024 transitions per agent).
PPO_HP: dict[str, Any] = {
    "batch_size": 256,
    "lr": 3e-4,
    "learn_step": 128,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_coef": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "update_epochs": 4,
    "target_kl": None,
    "value_norm": True,
}

#: MAPPO's: IPPO's and ``global_state``.
MAPPO_HP: dict[str, Any] = {**PPO_HP, "global_state": True}

_INTS = {"batch_size", "learn_step", "update_epochs"}
_POSITIVE = {"lr", "max_grad_norm"}
_UNIT = {"gamma", "gae_lambda"}  # within [0, 1]
_NON_NEGATIVE = {"clip_coef", "ent_coef", "vf_coef", "target_kl"}
_OPTIONAL = {"target_kl"}  # None switches the feature off
_BOOLS = {"value_norm", "global_state"}


def check_ppo_hyperparameters(defaults: Mapping[str, Any], hp: Mapping[str, Any] | None,
                              algorithm: str) -> dict[str, Any]:
    """``defaults`` overridden by ``hp``, every value checked; unknown names are an error."""
    out = dict(defaults)
    for name, value in (hp or {}).items():
        out[name] = check_ppo_hyperparameter(defaults, name, value, algorithm)
    return out


def check_ppo_hyperparameter(defaults: Mapping[str, Any], name: str, value: Any,
                             algorithm: str) -> Any:
    """The value as stored (ints stay ints, None where allowed), or ValueError saying why not."""
    if name not in defaults:
        raise ValueError(f"{algorithm} has no hyperparameter {name!r}; it has {sorted(defaults)}")
    if value is None and name in _OPTIONAL:
        return None
    if name in _BOOLS:
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return bool(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if name in _INTS:
        if float(value) != int(value) or int(value) < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        return int(value)
    value = float(value)
    if name in _POSITIVE and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if name in _UNIT and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1], got {value}")
    if name in _NON_NEGATIVE and not value >= 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value
