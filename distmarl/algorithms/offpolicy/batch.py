"""Off-policy batch -> clean tensors, plus the masked losses and TD target MADDPG and MATD3 use.

Cleaning rules (why: NaN placeholders must never reach a loss, since ``NaN * 0`` is still NaN):
- observations: NaN -> 0 everywhere (a dead agent's placeholder is a zero input to the
  centralised critics of the agents that are still active);
- actions: to critic form, placeholders -> 0 (see
  :mod:`distmarl.algorithms.common.space_tensors`);
- reward / terminated: set to 0 on inactive rows; those rows are masked out of the losses anyway.
``truncated`` is read only to check the batch is complete: a time limit does not stop
bootstrapping, because the state after it still has value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from distmarl.algorithms.common.observations import Input, ObsReader, joint_input, joint_tensor
from distmarl.algorithms.common.space_tensors import ActionCodec, require_batch_keys
from distmarl.networks.inputs import InputSpec
from distmarl.types import N_STEPS_FIELD, OFF_POLICY_FIELDS

Tensors = dict[str, torch.Tensor]


class CleanBatch(NamedTuple):
    """Per-agent tensors on the learner's device; ``B`` rows, scalars as ``(B, 1)`` float32."""

    obs: dict[str, Input]  #: network input per agent (vectors (B, obs_dim)), NaN -> 0
    action: Tensors  #: (B, act_dim) critic form
    reward: Tensors  #: (B, n) the row's n rewards undiscounted (n-step rows; else n = 1), 0 where inactive
    next_obs: dict[str, Input]  #: the true next observation, as ``obs``
    terminated: Tensors  #: (B, 1) 0/1, 0 where inactive
    active: Tensors  #: (B, 1) 0/1
    joint: InputSpec  #: what the centralised critics read
    mask: dict[str, torch.Tensor | None]  #: (B, n) bool legal actions, or None (all legal)
    next_mask: dict[str, torch.Tensor | None]  #: the next observation's legal actions
    n_steps: Tensors  #: (B, 1) env steps the row spans (1 without n-step rows)

    def joint_obs(self) -> Input:
        """All agents' observations as the critics read them (vectors: ``(B, sum obs_dim)``)."""
        return joint_tensor(self.obs, list(self.obs), self.joint)

    def joint_next_obs(self) -> Input:
        """All agents' next observations, as :meth:`joint_obs`."""
        return joint_tensor(self.next_obs, list(self.next_obs), self.joint)


def clean_batch(
    batch: Mapping[str, Mapping[str, Any]],
    readers: Mapping[str, ObsReader],
    codecs: Mapping[str, ActionCodec],
    device: torch.device,
) -> CleanBatch:
    """Validate the fields and agents of ``batch`` and apply the cleaning rules above."""
    agents = list(readers)
    require_batch_keys(batch, OFF_POLICY_FIELDS, agents)

    def col(field: str, a: str) -> torch.Tensor:
        t = torch.as_tensor(batch[field][a], device=device)
        return t.reshape(t.shape[0], 1).float()

    def rewards(a: str) -> torch.Tensor:
        t = torch.as_tensor(batch["reward"][a], device=device).float()
        return t.reshape(t.shape[0], -1)  # (B, n): n-step rows hold n rewards

    active = {a: (col("active", a) > 0).float() for a in agents}
    n_step = N_STEPS_FIELD in batch
    return CleanBatch(
        obs={a: readers[a].tensor(batch["obs"][a], device) for a in agents},
        action={a: codecs[a].encode(torch.as_tensor(batch["action"][a], device=device))
                for a in agents},
        reward={a: _zero_inactive(rewards(a), active[a]) for a in agents},
        next_obs={a: readers[a].tensor(batch["next_obs"][a], device) for a in agents},
        terminated={a: _zero_inactive((col("terminated", a) > 0).float(), active[a])
                    for a in agents},
        active=active,
        joint=joint_input(readers),
        mask={a: readers[a].mask(batch["obs"][a], device) for a in agents},
        next_mask={a: readers[a].mask(batch["next_obs"][a], device) for a in agents},
        n_steps={a: col(N_STEPS_FIELD, a) if n_step else torch.ones_like(active[a])
                 for a in agents},
    )


def _zero_inactive(x: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    return torch.where(active > 0, x, torch.zeros_like(x))


def td_target(reward: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor,
              gamma: float | torch.Tensor, n_steps: torch.Tensor | None = None
              ) -> torch.Tensor:
    """``sum_i gamma^i r_i + gamma^k * (1 - terminated) * Q'(s', a')`` over a row's ``n``
    rewards ``(..., B, n)`` (one-step rows: ``n = k = 1``), ``k = n_steps`` ``(..., B, 1)``
    (None: 1); the rest ``(..., B, 1)``; ``gamma`` a number or a tensor that broadcasts so
    (each member's, ``(K, 1, 1, 1)`` in a stack). Truncation bootstraps."""
    discounts = gamma ** torch.arange(reward.shape[-1], device=reward.device,
                                      dtype=reward.dtype)
    ret = (reward * discounts).sum(dim=-1, keepdim=True)
    bootstrap = gamma if n_steps is None else gamma ** n_steps
    return ret + bootstrap * (1.0 - terminated) * next_q


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over rows where ``mask`` is 1; 0 when no row is active. ``x`` and
    ``mask`` ``(..., B, 1)`` (broadcasting) -> ``(...)``: one mean per member and network of
    a stack.

    ``torch.where`` rather than a product, so a non-finite value on a masked row cannot leak.
    """
    kept = torch.where(mask > 0, x, torch.zeros_like(x))
    return kept.sum(dim=(-2, -1)) / mask.sum(dim=(-2, -1)).clamp_min(1.0)


def masked_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
               weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error over the active rows (:func:`masked_mean`), each scaled by its
    importance weight (prioritised replay) when given."""
    err = (pred - target) ** 2
    return masked_mean(err if weights is None else err * weights, mask)
