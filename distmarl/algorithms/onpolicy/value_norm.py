"""Value normalisation for PPO critics (MAPPO's ``ValueNorm``, skrl's ``value_preprocessor``).

The value network predicts a *normalised* value ``v_hat``; the value in return units is
``V = v_hat * std + mean``, with ``mean`` / ``std`` the running moments of every value target
(the GAE returns) the network was trained on. Values recorded by the behaviour policy and the
bootstrap ``V(next_obs)`` are in return units; the value loss compares ``v_hat`` with the target
normalised by the moments *after* they took in the current fragment's targets.

Why: returns on MPE tasks are tens of units (about -20 to -60 per agent on ``simple_spread``),
so an unnormalised value loss is large, its gradient is clipped hard by ``max_grad_norm``, and
the critic lags behind the policy (Yu et al. 2022, section 4: value normalisation helps both
IPPO and MAPPO).

The moments are exact over all targets seen (Chan et al.'s parallel update), in float64, and
are part of the weights sent to rollout workers, since they turn network outputs into values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: floor of the standard deviation used to normalise (a constant return would divide by 0)
MIN_STD = 1e-4


class RunningMoments:
    """Running mean and variance of scalar samples; ``update(x)`` with ``x`` of shape ``(N,)``.

    Before the first update ``mean`` is 0 and ``std`` 1, so ``denormalise`` is the identity.
    """

    def __init__(self) -> None:
        self.mean = 0.0
        self.var = 1.0
        self.count = 0.0

    @property
    def std(self) -> float:
        """``sqrt(var)``, at least :data:`MIN_STD`."""
        return max(float(np.sqrt(self.var)), MIN_STD)

    def update(self, x: torch.Tensor) -> None:
        """Take in the samples ``x`` ``(N,)`` (no-op when ``N == 0``)."""
        n = int(x.numel())
        if n == 0:
            return
        x64 = x.detach().double()
        batch_mean = float(x64.mean())
        batch_var = float(x64.var(unbiased=False))
        if self.count == 0:
            self.mean, self.var, self.count = batch_mean, batch_var, float(n)
            return
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.mean += delta * n / total
        self.var, self.count = m2 / total, total

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / std``, same shape and dtype."""
        return (x - self.mean) / self.std

    def denormalise(self, x: torch.Tensor) -> torch.Tensor:
        """``x * std + mean``, same shape and dtype."""
        return x * self.std + self.mean

    def state_dict(self) -> dict[str, float]:
        """``{"mean", "var", "count"}`` as floats."""
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict` (also accepts numpy scalars / 0-d arrays)."""
        self.mean = float(np.asarray(state["mean"]))
        self.var = float(np.asarray(state["var"]))
        self.count = float(np.asarray(state["count"]))
