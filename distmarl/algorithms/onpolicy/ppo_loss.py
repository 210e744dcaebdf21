"""PPO's clipped surrogate, value and entropy terms on one minibatch, inactive rows masked out.

Every input is ``(..., B)``: rows on the last axis, any leading axes (a stack's members
``(K, B)``) kept, each reduced over its own rows; ``active`` is bool. Inactive rows are replaced by 0 with ``torch.where``
*before* any ``exp``, square or product, so they contribute exactly nothing to the loss and to
the gradient (a later product with 0 would still let ``inf`` / ``NaN`` through in the backward
pass: ``0 * inf`` is NaN).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

#: |log pi_new - log pi_old| is clamped here before exp (e^20 ~ 5e8: far outside any clip range)
MAX_LOG_RATIO = 20.0


class PPOTerms(NamedTuple):
    """The minibatch loss and its parts (``(...)``: one per leading index, e.g. per member;
    only ``loss`` carries a graph)."""

    loss: torch.Tensor  #: policy + vf_coef * value - ent_coef * entropy
    policy: torch.Tensor  #: clipped surrogate loss (to minimise)
    value: torch.Tensor  #: 0.5 * mean squared error to the value targets
    entropy: torch.Tensor  #: mean entropy
    approx_kl: torch.Tensor  #: ``E[(r - 1) - log r]`` (Schulman's low-variance estimator)
    clip_fraction: torch.Tensor  #: share of rows whose ratio left [1 - clip, 1 + clip]


def _kept(x: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """``x`` on active rows, 0 elsewhere (the backward pass sends 0 to the masked rows)."""
    return torch.where(active, x, torch.zeros_like(x))


def masked_mean(x: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Mean over the active rows of the last axis (0 where none is active)."""
    kept = torch.where(active, x, torch.zeros_like(x))
    return kept.sum(-1) / active.sum(-1).clamp_min(1)


def normalise(x: torch.Tensor, active: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over the active rows of the last axis (inactive rows
    become 0)."""
    mean = masked_mean(x, active).unsqueeze(-1)
    var = masked_mean((x - mean) ** 2, active).unsqueeze(-1)
    return torch.where(active, (x - mean) / (var.sqrt() + eps), torch.zeros_like(x))


def ppo_terms(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor,
              entropy: torch.Tensor, new_value: torch.Tensor, value_target: torch.Tensor,
              active: torch.Tensor, clip_coef: float | torch.Tensor,
              ent_coef: float | torch.Tensor, vf_coef: float | torch.Tensor,
              normalise_advantage: bool = True) -> PPOTerms:
    """Clipped-objective PPO terms (CleanRL's, without value clipping); the coefficients are
    numbers or tensors of the leading shape ``(...)`` (a stack's: each member's own)."""
    # bounded before exp: a policy mean far outside the action box makes the clipped action's
    # log-probability huge, and exp() of the difference would overflow to inf (then NaN)
    log_ratio = _kept(new_log_prob - old_log_prob, active).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    ratio = log_ratio.exp()
    adv = normalise(advantage, active) if normalise_advantage else _kept(advantage, active)
    clip = torch.as_tensor(clip_coef, dtype=ratio.dtype, device=ratio.device)
    clip = clip.unsqueeze(-1) if clip.dim() else clip  # per row
    surrogate = torch.maximum(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    policy = masked_mean(surrogate, active)
    value = 0.5 * masked_mean(_kept(new_value - value_target, active) ** 2, active)
    ent = masked_mean(entropy, active)
    with torch.no_grad():
        approx_kl = masked_mean((ratio - 1) - log_ratio, active)
        clipped = ((ratio - 1).abs() > clip).float()
        clip_fraction = masked_mean(clipped, active)
    loss = policy + vf_coef * value - ent_coef * ent
    return PPOTerms(loss, policy.detach(), value.detach(), ent.detach(), approx_kl, clip_fraction)
