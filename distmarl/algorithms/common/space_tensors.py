"""Observation and action spaces <-> network tensors.

Observations: Box -> flattened float32 ``(B, prod(shape))``; Discrete(n) -> one-hot ``(B, n)``.
NaN is a placeholder for a dead/inactive agent and becomes 0 (a Discrete placeholder becomes an
all-zero row).

Actions have three forms:
- env form, what :meth:`ActionCodec.act` returns: Box -> float32 ``(N, *shape)`` within bounds;
  Discrete -> int64 ``(N,)``;
- network output: Box -> ``(B, dim)`` pre-tanh; Discrete -> ``(B, n)`` logits;
- critic form, what centralised critics read: Box -> ``(B, dim)`` scaled to [-1, 1] (0 is the
  middle of the range); Discrete -> one-hot ``(B, n)``. Stored actions are mapped into it by
  :meth:`ActionCodec.encode`; placeholders (NaN, out-of-range indices) become zeros.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces


def obs_dim(space: spaces.Space) -> int:
    """Width of the flattened observation."""
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    raise TypeError(f"unsupported observation space {space}; use Box or Discrete")


def obs_tensor(x: Any, space: spaces.Space, device: torch.device) -> torch.Tensor:
    """An observation batch ``(B, *shape)`` (array or tensor) -> ``(B, obs_dim)`` float32, NaN -> 0."""
    t = torch.as_tensor(x, device=device)
    if isinstance(space, spaces.Discrete):
        return _one_hot(t.reshape(-1), int(space.n), int(space.start))
    return torch.nan_to_num(t.reshape(t.shape[0], -1).float(), nan=0.0)


def _one_hot(idx: torch.Tensor, n: int, start: int = 0) -> torch.Tensor:
    """Indices ``(B,)`` (int, or float with NaN placeholders) -> one-hot ``(B, n)``; invalid -> 0."""
    if idx.is_floating_point():
        valid = torch.isfinite(idx)
        idx = torch.where(valid, idx, torch.zeros_like(idx)).round().long()
    else:
        valid = torch.ones_like(idx, dtype=torch.bool)
    idx = idx.long() - start
    valid = valid & (idx >= 0) & (idx < n)
    onehot = F.one_hot(torch.where(valid, idx, torch.zeros_like(idx)), n).float()
    return onehot * valid.unsqueeze(-1).float()


#: The logit a forbidden action gets: far below any real logit plus Gumbel noise (which stays
#: under about 50 in float32), yet finite, so softmax and its gradient stay finite.
MASKED_LOGIT = -1e8


def masked_logits(out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits ``(N, n)`` with the actions ``mask`` ``(N, n)`` forbids at :data:`MASKED_LOGIT`
    (None: all legal)."""
    if mask is None:
        return out
    return torch.where(mask.to(torch.bool), out, torch.full_like(out, MASKED_LOGIT))


def gumbel(shape: torch.Size, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Standard Gumbel noise drawn from ``generator``."""
    return gumbel_from(torch.rand(shape, generator=generator, device=device))


def gumbel_from(u: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel samples from uniform draws ``u`` in [0, 1) (its inverse distribution
    function)."""
    exponential = -torch.log(u.clamp_min(1e-20))  # Exp(1), > 0
    return -torch.log(exponential.clamp_min(1e-20))


class BoxBounds(NamedTuple):
    """A Box action space's bounds, flattened: ``low`` / ``high`` float32 ``(dim,)`` arrays,
    ``mid`` / ``half`` their centre and half-width as tensors on the device."""

    shape: tuple[int, ...]
    dim: int
    low: np.ndarray
    high: np.ndarray
    mid: torch.Tensor
    half: torch.Tensor


def box_bounds(space: spaces.Box, device: torch.device) -> BoxBounds:
    """The bounds every Box action head maps to; ValueError unless they are finite with
    ``high > low``."""
    low, high = space.low.astype(np.float32).ravel(), space.high.astype(np.float32).ravel()
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise ValueError(f"Box action spaces need finite bounds with high > low, got {space}")
    return BoxBounds(space.shape, int(low.size), low, high,
                     torch.as_tensor((high + low) / 2, device=device),
                     torch.as_tensor((high - low) / 2, device=device))


def require_batch_keys(batch: Mapping[str, Mapping[str, Any]], fields: Sequence[str],
                       agents: Sequence[str]) -> None:
    """KeyError naming what is missing unless ``batch[field][agent]`` exists for every field
    and agent."""
    missing = [f for f in fields if f not in batch]
    if missing:
        raise KeyError(f"batch lacks fields {missing}; expected {list(fields)}")
    for field in fields:
        absent = [a for a in agents if a not in batch[field]]
        if absent:
            raise KeyError(f"batch[{field!r}] lacks agents {absent}")


class ActionCodec(ABC):
    """Converts between one agent's action space and its networks (see the module docstring)."""

    #: width of the actor output and of this agent's slice of the critic's action input
    dim: int
    #: whether exploration adds a noise process (Box) or samples the policy (Discrete)
    uses_noise: bool
    #: whether :meth:`noise_from` makes samples (Discrete's Gumbel) or returns None (Box)
    draws: bool

    @abstractmethod
    def act(self, out: torch.Tensor, explore: bool, noise: np.ndarray | None,
            generator: torch.Generator, mask: torch.Tensor | None = None) -> np.ndarray:
        """Network output ``(N, dim)`` -> env actions (numpy, env form); ``mask`` ``(N, dim)``
        bool: the legal actions (Discrete only)."""

    def policy(self, out: torch.Tensor, generator: torch.Generator,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Differentiable critic-form action for the actor loss."""
        return self.policy_with(out, self._drawn(out, generator), mask)

    def target(self, out: torch.Tensor, generator: torch.Generator,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Critic-form action of a target actor (no gradient needed)."""
        return self.target_with(out, self._drawn(out, generator), mask)

    def _drawn(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        """:meth:`noise_from` of uniform draws of ``out``'s shape from ``generator``."""
        if not self.draws:
            return None
        return self.noise_from(torch.rand(out.shape, generator=generator, device=out.device))

    @abstractmethod
    def noise_from(self, u: torch.Tensor) -> torch.Tensor | None:
        """What :meth:`policy` and :meth:`target` add to an output, made from uniform draws
        ``u`` of its shape (None: nothing). Made apart, so that a stack draws every member's
        at once (:mod:`~distmarl.algorithms.offpolicy.draws`)."""

    @abstractmethod
    def policy_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`policy` with its :meth:`noise` given."""

    @abstractmethod
    def target_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`target` with its :meth:`noise` given."""

    @abstractmethod
    def encode(self, stored: torch.Tensor) -> torch.Tensor:
        """Stored actions ``(B, *)`` -> critic form ``(B, dim)``."""


class BoxCodec(ActionCodec):
    """Box actions: ``tanh`` output scaled to ``[low, high]``; exploration noise in env units
    (as AgileRL adds it), then clipped to the bounds."""

    uses_noise = True
    draws = False

    def __init__(self, space: spaces.Box, device: torch.device) -> None:
        bounds = box_bounds(space, device)
        self.shape, self.dim = bounds.shape, bounds.dim
        self.low_np, self.high_np = bounds.low, bounds.high
        self.mid, self.half = bounds.mid, bounds.half

    def act(self, out: torch.Tensor, explore: bool, noise: np.ndarray | None,
            generator: torch.Generator, mask: torch.Tensor | None = None) -> np.ndarray:
        _no_mask(mask)
        a = (self.mid + self.half * torch.tanh(out)).cpu().numpy()
        if explore and noise is not None:
            a = np.clip(a + noise, self.low_np, self.high_np)
        return a.astype(np.float32, copy=False).reshape(a.shape[0], *self.shape)

    def noise_from(self, u: torch.Tensor) -> torch.Tensor | None:
        return None  # deterministic

    def policy_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.tanh(out)

    def target_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.tanh(out)

    def encode(self, stored: torch.Tensor) -> torch.Tensor:
        a = stored.reshape(stored.shape[0], -1).float()
        u = (a - self.mid) / self.half
        return torch.nan_to_num(u, nan=0.0).clamp(-1.0, 1.0)


def _no_mask(mask: torch.Tensor | None) -> None:
    if mask is not None:
        raise ValueError("action masks apply to Discrete actions only; this agent's are Box")


class DiscreteCodec(ActionCodec):
    """Discrete actions via Gumbel-softmax: exploring samples the categorical policy (Gumbel-max),
    acting greedily takes the arg-max; the actor loss uses the straight-through estimator (a hard
    one-hot forward, the soft sample's gradient), which matches the one-hot actions in replay.

    With a mask, forbidden actions' logits drop to :data:`MASKED_LOGIT` before any of this, so
    acting never picks one, the target actor never bootstraps from one, and the actor loss's
    softmax puts no weight on them."""

    uses_noise = False
    draws = True

    def __init__(self, space: spaces.Discrete, device: torch.device) -> None:
        self.dim = int(space.n)
        self.start = int(space.start)

    def act(self, out: torch.Tensor, explore: bool, noise: np.ndarray | None,
            generator: torch.Generator, mask: torch.Tensor | None = None) -> np.ndarray:
        out = masked_logits(out, mask)
        logits = out + gumbel(out.shape, generator, out.device) if explore else out
        return (logits.argmax(dim=-1) + self.start).cpu().numpy().astype(np.int64)

    def noise_from(self, u: torch.Tensor) -> torch.Tensor | None:
        return gumbel_from(u)

    def policy_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        assert noise is not None
        soft = torch.softmax(masked_logits(out, mask) + noise, dim=-1)
        hard = _hard(soft.argmax(dim=-1, keepdim=True), soft)
        return hard - soft.detach() + soft

    def target_with(self, out: torch.Tensor, noise: torch.Tensor | None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        assert noise is not None
        logits = masked_logits(out, mask) + noise
        return _hard(logits.argmax(dim=-1, keepdim=True), logits)

    def encode(self, stored: torch.Tensor) -> torch.Tensor:
        return _one_hot(stored.reshape(-1), self.dim, self.start)


def _hard(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """One-hot rows ``like``'s shape, 1 at ``index`` ``(..., 1)`` (a scatter rather than
    ``F.one_hot``, so it also runs under ``torch.func.vmap``)."""
    return torch.zeros_like(like).scatter(-1, index, 1.0)


def make_codec(space: spaces.Space, device: torch.device) -> ActionCodec:
    """The codec for ``space`` (Box or Discrete)."""
    if isinstance(space, spaces.Box):
        return BoxCodec(space, device)
    if isinstance(space, spaces.Discrete):
        return DiscreteCodec(space, device)
    raise TypeError(f"unsupported action space {space}; use Box or Discrete")
