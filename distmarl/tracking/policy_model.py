"""The elite member as a ``torch.nn.Module`` that acts, for ``mlflow.pytorch.log_model``.

``mlflow.pytorch.load_model(uri)`` gives back a :class:`PolicyModel`; ``model(obs)`` with
``obs[agent]`` of shape ``(num_envs, *obs_shape)`` (numpy or tensors) returns the greedy actions
``agent -> np.ndarray``, ready for ``VectorParallelEnv.step`` (or, for one env, index ``[0]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


class PolicyModel(torch.nn.Module):
    """Wraps a whole algorithm (any :class:`~distmarl.algorithms.Algorithm`) and acts greedily."""

    def __init__(self, algo: Any) -> None:
        super().__init__()
        self.algo = algo
        self.agents = list(algo.agents)

    @torch.no_grad()
    def forward(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        arrays = {a: (o.detach().cpu().numpy() if isinstance(o, torch.Tensor) else np.asarray(o))
                  for a, o in obs.items()}
        return self.algo.act(arrays, explore=False)
