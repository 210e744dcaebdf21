"""The elite member as a ``torch.nn.Module`` that acts, for ``mlflow.pytorch.log_model``.

``mlflow.pytorch.load_model(uri)`` gives back a :class:`PolicyModel`; ``model(obs)`` with
``obs[agent]`` of shape ``(num_envs, *obs_shape)`` (numpy or tensors; a dict of them for dict
observations, ``action_mask`` included) returns the greedy legal actions
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
        return self.algo.act({a: _arrays(o) for a, o in obs.items()}, explore=False)


def _arrays(x: Any) -> Any:
    """Tensors and sequences -> numpy arrays, dicts key by key."""
    if isinstance(x, Mapping):
        return {k: _arrays(v) for k, v in x.items()}
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
