"""Exploration noise for Box actions: one independent process per sub-env.

Both processes produce ``(num_envs, dim)`` float32 arrays in env action units and draw from an
explicit ``numpy.random.Generator``. ``reset(mask)`` restarts the sub-envs whose episode ended, so
an Ornstein-Uhlenbeck trajectory never carries over from one episode to the next.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

#: Hyperparameters that configure the noise (AgileRL's names).
NOISE_HP: tuple[str, ...] = ("O_U_noise", "expl_noise", "mean_noise", "theta", "dt")


class ActionNoise(Protocol):
    """A per-sub-env noise process."""

    num_envs: int
    dim: int

    def sample(self) -> np.ndarray:
        """Next noise ``(num_envs, dim)``."""

    def reset(self, mask: np.ndarray) -> None:
        """Restart the sub-envs where ``mask`` (bool ``(num_envs,)``) is True."""

    def state_dict(self) -> dict[str, Any]:
        """Plain state."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""


class GaussianNoise:
    """i.i.d. ``N(mean_noise, expl_noise^2)`` each step (no state to reset)."""

    def __init__(self, num_envs: int, dim: int, rng: np.random.Generator,
                 expl_noise: float, mean_noise: float = 0.0) -> None:
        self.num_envs, self.dim, self.rng = num_envs, dim, rng
        self.std, self.mean = float(expl_noise), float(mean_noise)

    def sample(self) -> np.ndarray:
        return (self.mean + self.std * self.rng.standard_normal((self.num_envs, self.dim))).astype(
            np.float32)

    def reset(self, mask: np.ndarray) -> None:
        _check_mask(mask, self.num_envs)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


class OUNoise:
    """Ornstein-Uhlenbeck: ``x += theta * (mean - x) * dt + expl_noise * sqrt(dt) * N(0, 1)``.

    Starts (and restarts) at ``mean_noise``; the sample returned is the new ``x``.
    """

    def __init__(self, num_envs: int, dim: int, rng: np.random.Generator, expl_noise: float,
                 mean_noise: float = 0.0, theta: float = 0.15, dt: float = 1e-2) -> None:
        self.num_envs, self.dim, self.rng = num_envs, dim, rng
        self.sigma, self.mean = float(expl_noise), float(mean_noise)
        self.theta, self.dt = float(theta), float(dt)
        self.x = np.full((num_envs, dim), self.mean, dtype=np.float64)

    def sample(self) -> np.ndarray:
        drift = self.theta * (self.mean - self.x) * self.dt
        diffusion = self.sigma * np.sqrt(self.dt) * self.rng.standard_normal(self.x.shape)
        self.x = self.x + drift + diffusion
        return self.x.astype(np.float32)

    def reset(self, mask: np.ndarray) -> None:
        self.x[_check_mask(mask, self.num_envs)] = self.mean

    def state_dict(self) -> dict[str, Any]:
        return {"x": torch.from_numpy(self.x.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        x = state["x"].detach().cpu().numpy().astype(np.float64)
        if x.shape == self.x.shape:  # a process for another num_envs starts afresh instead
            self.x = x.copy()


def make_noise(hp: dict[str, Any], num_envs: int, dim: int, rng: np.random.Generator) -> ActionNoise:
    """OU noise when ``hp["O_U_noise"]`` is true, Gaussian otherwise."""
    if hp["O_U_noise"]:
        return OUNoise(num_envs, dim, rng, hp["expl_noise"], hp["mean_noise"], hp["theta"], hp["dt"])
    return GaussianNoise(num_envs, dim, rng, hp["expl_noise"], hp["mean_noise"])


def _check_mask(mask: np.ndarray, num_envs: int) -> np.ndarray:
    mask = np.asarray(mask, dtype=bool).reshape(-1)
    if mask.shape != (num_envs,):
        raise ValueError(f"reset mask must have shape ({num_envs},), got {mask.shape}")
    return mask
