"""Batched infos, and the two helpers a rollout loop needs after every ``step``.

Env infos are batched the way gymnasium's vector envs do it: ``infos[agent][key]`` is an array
``(num_envs, ...)`` and ``infos[agent]["_" + key]`` a bool mask ``(num_envs,)`` of the sub-envs
that reported ``key``; top-level keys and nested dicts likewise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from distmarl import tree
from distmarl.envs.runner import AGENT_INFO_KEYS, LEGACY_INFO_KEYS

#: Top-level keys a vector env writes itself; no agent may be named like one of them.
RESERVED_KEYS = frozenset(
    {
        "active",
        "agent_mask",
        "env_defined_actions",
        "final_obs",
        "_final_obs",
        "final_info",
        "_final_info",
        "nonfinite",
        "capped",
        "state",
        "final_state",
    }
)


def merge_info(
    dst: dict[str, Any], info: Mapping[str, Any], i: int, n: int, agents: frozenset[str]
) -> None:
    """Write sub-env ``i``'s info dict into the batched ``dst`` (``n`` sub-envs)."""
    for key, value in info.items():
        if key in agents and isinstance(value, Mapping):
            sub = {k: v for k, v in value.items() if k not in AGENT_INFO_KEYS}
            if sub:
                _merge(dst.setdefault(key, {}), sub, i, n)
        elif key not in LEGACY_INFO_KEYS and key not in RESERVED_KEYS:
            _merge_one(dst, key, value, i, n)


def _merge(dst: dict[str, Any], info: Mapping[str, Any], i: int, n: int) -> None:
    for key, value in info.items():
        _merge_one(dst, key, value, i, n)


def _merge_one(dst: dict[str, Any], key: str, value: Any, i: int, n: int) -> None:
    if isinstance(value, Mapping):
        _merge(dst.setdefault(key, {}), value, i, n)
    else:
        arr = dst.get(key)
        if arr is None:
            arr = dst[key] = _empty_for(value, n)
        try:
            arr[i] = value
        except (ValueError, TypeError):  # a value of another shape / kind than before
            arr = dst[key] = arr.astype(object)
            arr[i] = value
    mask = dst.setdefault(f"_{key}", np.zeros(n, dtype=bool))
    mask[i] = True


def _empty_for(value: Any, n: int) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        return np.zeros(n, dtype=bool)
    if isinstance(value, (int, float, np.number)):
        return np.zeros(n, dtype=np.asarray(value).dtype)
    if isinstance(value, np.ndarray) and value.dtype != object:
        return np.zeros((n, *value.shape), dtype=value.dtype)
    return np.full(n, None, dtype=object)


def true_next_obs(obs: Mapping[str, Any], infos: Mapping[str, Any]) -> dict[str, Any]:
    """The next observation of the transition just stepped, per agent, ``(num_envs, *obs_shape)``.

    Where a sub-env's episode ended (``infos["_final_obs"]``) that is the true last observation
    ``infos["final_obs"][agent]``, not the reset observation in ``obs``; elsewhere ``obs``.
    Nested (Dict / Tuple) observations are handled leaf by leaf.
    """
    ended = np.asarray(infos["_final_obs"], dtype=bool)
    final = infos["final_obs"]

    def pick(now: np.ndarray, last: np.ndarray) -> np.ndarray:
        return np.where(ended.reshape(-1, *([1] * (now.ndim - 1))), last, now)

    return {a: tree.map(pick, obs[a], final[a]) for a in obs}


def true_next_state(infos: Mapping[str, Any]) -> np.ndarray:
    """The global state after the transition just stepped ``(num_envs, *state_shape)``: the
    ending step's ``infos["final_state"]`` where an episode ended, else ``infos["state"]``
    (a vector env made with ``global_state=True``)."""
    ended = np.asarray(infos["_final_obs"], dtype=bool)
    now, last = np.asarray(infos["state"]), np.asarray(infos["final_state"])
    return np.where(ended.reshape(-1, *([1] * (now.ndim - 1))), last, now)


def env_defined_rows(eda: np.ndarray) -> np.ndarray:
    """Bool ``(num_envs,)``: rows of an ``env_defined_actions`` array that hold an action."""
    return ~np.isnan(eda.reshape(len(eda), -1)).any(axis=1)


def apply_env_defined_actions(
    actions: Mapping[str, np.ndarray], infos: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """``actions`` with the env-defined actions of ``infos`` (from the previous reset / step)
    put in place, as ``VectorParallelEnv.step`` applies them: store these as the actions taken.

    ``infos["env_defined_actions"][agent]`` is float ``(num_envs, *act_shape)``, NaN in rows
    where the policy chooses (``infos["agent_mask"][agent]`` True); the input is not modified.
    """
    eda = infos.get("env_defined_actions") or {}
    out: dict[str, np.ndarray] = {}
    for agent, act in actions.items():
        e = eda.get(agent)
        rows = env_defined_rows(e) if e is not None else None
        if e is None or rows is None or not rows.any():
            out[agent] = act
            continue
        arr = np.array(act, copy=True)
        vals = e[rows]
        if not np.issubdtype(arr.dtype, np.floating):
            vals = np.rint(vals)
        arr[rows] = vals.astype(arr.dtype)
        out[agent] = arr
    return out


def fold_info_masks(obs: Mapping[str, Any], infos: Mapping[str, Any]) -> dict[str, Any]:
    """``obs`` with ``infos[agent]["action_mask"]`` folded in as ``{"observation",
    "action_mask"}`` where the env reports masks there (sub-envs that did not: all legal)."""
    out = dict(obs)
    for a, x in obs.items():
        info = infos.get(a)
        if isinstance(x, Mapping) or not isinstance(info, Mapping) or "action_mask" not in info:
            continue
        mask = np.asarray(info["action_mask"])
        reported = np.asarray(info.get("_action_mask", np.ones(len(mask), dtype=bool)), bool)
        mask = np.where(reported.reshape(-1, *([1] * (mask.ndim - 1))), mask, 1).astype(np.int8)
        out[a] = {"observation": x, "action_mask": mask}
    return out
