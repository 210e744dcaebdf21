"""Stochastic policies for PPO: a network output -> an action distribution, per action space.

- Box: a diagonal Gaussian over *normalised* actions ``u`` (``a = mid + half * u``, so [-1, 1] is
  the action range) with mean ``tanh(network output)`` and a state-independent log-std (one
  learned vector per policy, CleanRL's choice). Sampled ``u`` is clipped to [-1, 1] before it
  reaches the env, and the log-probability is that of the *clipped* ``u``: stored actions are the
  clipped ones (what the env got), so old and new log-probs are evaluated at the same point and
  the ratio is consistent whoever stores the action. That probability is the clipped Gaussian's
  own (Fujita & Maeda 2018, "Clipped Action Policy Gradient"): a dimension at a bound scores the
  Gaussian's mass beyond it, ``log Phi((mean - 1) / std)`` at +1 and ``log Phi((-1 - mean) /
  std)`` at -1, an interior one its density. Scoring a bound by the density *at* the bound would
  not be a likelihood: its score (the gradient of the log-prob) would no longer have expectation
  zero, and the policy gradient would be biased (at the initial std of 0.5, for raw outputs 0.5
  and -1, the expected score is -0.22 and -0.42 for the log-std and -0.12 and +0.17 for the
  outputs, instead of 0). The mean stays inside the range: with an unbounded mean that drifts
  past a bound, nearly every sample is clipped to that bound, its probability is nearly 1, and
  the policy gets no gradient back. Log-probs and entropy are in normalised units (they differ
  from env units by the constant ``sum(log half)``, which cancels in every ratio and gradient);
  the entropy is the unclipped Gaussian's.
- Discrete: a categorical over the logits; an action mask (bool ``(B, n)``, True = legal) sets
  illegal logits to ``-1e8``. A row with no legal action is treated as unmasked.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import torch
from gymnasium import spaces

from distmarl.algorithms.common.space_tensors import box_bounds, gumbel, masked_logits

#: initial log-std of Gaussian policies: std 0.5 of the half-range, ~2% of samples per side clip
INIT_LOG_STD = math.log(0.5)
LOG_STD_BOUNDS = (-5.0, 2.0)
#: a normalised action this close to a bound counts as clipped to it (float round trips through
#: env units; a Gaussian sample landing this close unclipped has probability ~1e-6 * density)
AT_BOUND = 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class PolicyHead(ABC):
    """One agent group's action space seen by PPO (see the module docstring)."""

    #: width of the policy network's output
    dim: int
    #: whether the policy has a learned log-std vector of width ``dim``
    has_log_std: bool

    @abstractmethod
    def sample(self, out: torch.Tensor, log_std: torch.Tensor | None, mask: torch.Tensor | None,
               explore: bool, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, dim)`` output -> (internal action, its log-prob ``(B,)``); not exploring: the
        mean / arg-max action."""

    @abstractmethod
    def evaluate(self, out: torch.Tensor, log_std: torch.Tensor | None, action: torch.Tensor,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-prob of internal ``action`` and the entropy, both ``(B,)``, differentiable."""

    @abstractmethod
    def to_env(self, action: torch.Tensor) -> np.ndarray:
        """Internal actions -> env form (Box float32 ``(B, *shape)``, Discrete int64 ``(B,)``)."""

    @abstractmethod
    def from_env(self, stored: torch.Tensor) -> torch.Tensor:
        """Stored env-form actions ``(B, ...)`` -> internal form; NaN / out-of-range placeholders
        (rows of inactive agents) become valid values so no NaN reaches a gradient."""


class GaussianHead(PolicyHead):
    """Box actions (internal form: normalised ``u`` float ``(B, dim)``)."""

    has_log_std = True

    def __init__(self, space: spaces.Box, device: torch.device) -> None:
        bounds = box_bounds(space, device)
        self.shape, self.dim = bounds.shape, bounds.dim
        self.mid, self.half = bounds.mid, bounds.half

    def sample(self, out: torch.Tensor, log_std: torch.Tensor | None, mask: torch.Tensor | None,
               explore: bool, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        u = mean = torch.tanh(out)
        if explore:
            std = _bounded(log_std).exp()
            u = mean + std * torch.randn(out.shape, generator=generator, device=out.device)
        u = u.clamp(-1.0, 1.0)
        return u, self._log_prob_entropy(mean, log_std, u)[0]

    def evaluate(self, out: torch.Tensor, log_std: torch.Tensor | None, action: torch.Tensor,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        return self._log_prob_entropy(torch.tanh(out), log_std, action)

    @staticmethod
    def _log_prob_entropy(mean: torch.Tensor, log_std: torch.Tensor | None, action: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor]:
        """Clipped diagonal-Gaussian log-prob of ``action`` (``(B, dim)`` in [-1, 1]) and the
        unclipped Gaussian's entropy, both ``(B,)``: per dimension, the mass beyond the bound
        for an action at a bound (within :data:`AT_BOUND`), else the density."""
        ls = _bounded(log_std).expand_as(mean)
        std = ls.exp()
        density = -0.5 * ((action - mean) / std).pow(2) - ls - _HALF_LOG_2PI
        above = torch.special.log_ndtr((mean - 1.0) / std)  # log P(sample >= +1)
        below = torch.special.log_ndtr((-1.0 - mean) / std)  # log P(sample <= -1)
        log_prob = torch.where(action >= 1.0 - AT_BOUND, above,
                               torch.where(action <= -1.0 + AT_BOUND, below, density)).sum(-1)
        entropy = (0.5 + _HALF_LOG_2PI + ls).sum(-1)
        return log_prob, entropy

    def to_env(self, action: torch.Tensor) -> np.ndarray:
        a = (self.mid + self.half * action).cpu().numpy().astype(np.float32, copy=False)
        return a.reshape(a.shape[0], *self.shape)

    def from_env(self, stored: torch.Tensor) -> torch.Tensor:
        a = stored.reshape(stored.shape[0], -1).float()
        return torch.nan_to_num((a - self.mid) / self.half, nan=0.0).clamp(-1.0, 1.0)


class CategoricalHead(PolicyHead):
    """Discrete actions (internal form: index ``0..n-1`` int64 ``(B,)``)."""

    has_log_std = False

    def __init__(self, space: spaces.Discrete, device: torch.device) -> None:
        self.dim = int(space.n)
        self.start = int(space.start)

    def sample(self, out: torch.Tensor, log_std: torch.Tensor | None, mask: torch.Tensor | None,
               explore: bool, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        logits = masked_logits(out, mask)
        if explore:  # Gumbel-max: an exact categorical sample from our own generator
            logits = logits + gumbel(logits.shape, generator, logits.device)
        idx = logits.argmax(dim=-1)
        return idx, self.evaluate(out, log_std, idx, mask)[0]

    def evaluate(self, out: torch.Tensor, log_std: torch.Tensor | None, action: torch.Tensor,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        logp_all = torch.log_softmax(masked_logits(out, mask), dim=-1)
        log_prob = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return log_prob, entropy

    def to_env(self, action: torch.Tensor) -> np.ndarray:
        return (action + self.start).cpu().numpy().astype(np.int64)

    def from_env(self, stored: torch.Tensor) -> torch.Tensor:
        idx = stored.reshape(-1)
        if idx.is_floating_point():
            idx = torch.nan_to_num(idx, nan=float(self.start)).round()
        return (idx.long() - self.start).clamp(0, self.dim - 1)


def make_head(space: spaces.Space, device: torch.device) -> PolicyHead:
    """The policy head for ``space`` (Box or Discrete)."""
    if isinstance(space, spaces.Box):
        return GaussianHead(space, device)
    if isinstance(space, spaces.Discrete):
        return CategoricalHead(space, device)
    raise TypeError(f"unsupported action space {space}; use Box or Discrete")


def stacked_masks(masks: Sequence[torch.Tensor | None], n: int, dim: int,
                  device: torch.device) -> torch.Tensor | None:
    """Per-agent masks ``(n, dim)`` (None: all legal) stacked along the batch axis into
    ``(len(masks) * n, dim)``; None when no agent has one (the heads then skip masking)."""
    if all(m is None for m in masks):
        return None
    ones = torch.ones(n, dim, dtype=torch.bool, device=device)
    return torch.cat([ones if m is None else m for m in masks])


def _bounded(log_std: torch.Tensor | None) -> torch.Tensor:
    if log_std is None:
        raise ValueError("a Gaussian policy needs its log_std")
    return log_std.clamp(*LOG_STD_BOUNDS)
