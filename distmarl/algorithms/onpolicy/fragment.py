"""A time-major on-policy fragment -> clean per-agent tensors, and observations with action masks.

Fields arrive as ``batch[field][agent]`` of shape ``(T, E, ...)`` (``T`` vectorised steps of
``E`` sub-envs); scalar fields may be ``(T, E)`` or ``(T, E, 1)``. Observations are arrays, or
PettingZoo-style dicts ``{"observation": (T, E, ...), "action_mask": (T, E, n)}``. The optional
``STATE_FIELDS`` (``state``: the env's global state ``(T, E, state_dim)``) are
read when present.

Cleaning rules (NaN placeholders of inactive rows must never reach a loss or a gradient:
``NaN * 0`` is NaN, and so is a masked row's gradient through ``exp`` or a NaN action):
observations NaN -> 0; actions -> the policy head's internal form with placeholders made valid;
log_prob / value -> 0 on inactive rows; reward and terminated kept on inactive rows (a waiting
player's reward is credited to its last move, see :mod:`~distmarl.algorithms.onpolicy.gae`),
NaN -> 0; states NaN -> 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from distmarl import tree
from distmarl.algorithms.common.observations import Input, ObsReader
from distmarl.algorithms.common.space_tensors import require_batch_keys
from distmarl.algorithms.onpolicy.policy_heads import PolicyHead
from distmarl.types import ON_POLICY_FIELDS, STATE_FIELDS

__all__ = ["AgentFragment", "clean_fragment"]


class AgentFragment(NamedTuple):
    """One agent's clean fragment; ``(T, E, ...)`` each."""

    obs: Input  #: (T, E, obs_dim), images (T, E, *image) as stored, or a dict of them
    mask: torch.Tensor | None  #: (T, E, n) bool action mask, or None
    action: torch.Tensor  #: (T, E, dim) float (Box, normalised) or (T, E) int64 (Discrete)
    reward: torch.Tensor  #: (T, E) float32, NaN -> 0
    terminated: torch.Tensor  #: (T, E) float32 0/1
    truncated: torch.Tensor  #: (T, E) float32 0/1
    active: torch.Tensor  #: (T, E) bool
    log_prob: torch.Tensor  #: (T, E) behaviour log-prob, 0 where inactive
    value: torch.Tensor  #: (T, E) behaviour V(obs), 0 where inactive
    next_value: torch.Tensor  #: (T, E) behaviour V(true next obs), NaN -> 0
    state: torch.Tensor | None = None  #: (T, E, state_dim) global state, or None


def clean_fragment(batch: Mapping[str, Mapping[str, Any]],
                   readers: Mapping[str, ObsReader],
                   heads: Mapping[str, PolicyHead], device: torch.device
                   ) -> dict[str, AgentFragment]:
    """Validate ``batch`` (fields, agents, ``(T, E)`` shapes) and apply the cleaning rules."""
    agents = list(readers)
    require_batch_keys(batch, ON_POLICY_FIELDS, agents)
    reward0 = torch.as_tensor(batch["reward"][agents[0]])
    if reward0.dim() not in (2, 3) or (reward0.dim() == 3 and reward0.shape[2] != 1):
        raise ValueError(f"on-policy fields must be time-major (T, E[, 1]); reward has shape "
                         f"{tuple(reward0.shape)}")
    t, e = int(reward0.shape[0]), int(reward0.shape[1])
    return {a: _clean_agent(batch, a, readers[a], heads[a], t, e, device)
            for a in agents}


def _clean_agent(batch: Mapping[str, Mapping[str, Any]], a: str, reader: ObsReader,
                 head: PolicyHead, t: int, e: int, device: torch.device) -> AgentFragment:
    def flat_leaf(x: Any) -> torch.Tensor:  # (T, E, ...) -> (T * E, ...)
        x = torch.as_tensor(x, device=device)
        if tuple(x.shape[:2]) != (t, e):
            raise ValueError(f"agent {a!r}: expected leading shape ({t}, {e}), got "
                             f"{tuple(x.shape)}")
        return x.reshape(t * e, *x.shape[2:])

    def flat(x: Any) -> Any:
        return tree.map(flat_leaf, x)

    def col(field: str) -> torch.Tensor:
        x = flat(batch[field][a])
        return x.reshape(t, e).float()

    active = torch.nan_to_num(col("active"), nan=0.0) > 0

    def zeroed(x: torch.Tensor) -> torch.Tensor:
        return torch.where(active, torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0),
                           torch.zeros_like(x))

    def state(field: str) -> torch.Tensor | None:
        if field not in batch:
            return None
        x = flat(batch[field][a]).float()
        return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).reshape(t, e, -1)

    raw_obs = flat(batch["obs"][a])
    obs = reader.tensor(raw_obs, device)
    mask = reader.mask(raw_obs, device)
    action = head.from_env(flat(batch["action"][a]))

    def time_major(x: torch.Tensor) -> torch.Tensor:  # (T * E, ...) -> (T, E, ...)
        return x.reshape(t, e, *x.shape[1:])

    return AgentFragment(
        obs=tree.map(time_major, obs),
        mask=None if mask is None else mask.reshape(t, e, -1),
        action=action.reshape(t, e, *action.shape[1:]),
        reward=torch.nan_to_num(col("reward"), nan=0.0, posinf=0.0, neginf=0.0),
        terminated=(col("terminated") > 0).float(),
        truncated=(col("truncated") > 0).float(),
        active=active,
        log_prob=zeroed(col("log_prob")),
        value=zeroed(col("value")),
        next_value=torch.nan_to_num(col("next_value"), nan=0.0, posinf=0.0, neginf=0.0),
        state=state(STATE_FIELDS[0]),
    )
