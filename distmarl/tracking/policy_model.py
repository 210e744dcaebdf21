"""The elite member as a ``torch.nn.Module`` that acts, for ``mlflow.pytorch.log_model``.

``mlflow.pytorch.load_model(uri)`` gives back a :class:`PolicyModel`; ``model(obs)`` with
``obs[agent]`` of shape ``(num_envs, *obs_shape)`` (numpy or tensors; a dict with
``observation`` and ``action_mask`` for masked agents) returns the greedy legal actions
``agent -> np.ndarray``, ready for ``VectorParallelEnv.step`` (or, for one env, index ``[0]``).
It holds each agent's :class:`~distmarl.export.actor.GreedyActor`, so its parameters are
registered: ``.to(device)`` moves them, and ``model.actor(agent)`` can be traced or scripted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from distmarl.export.actor import GreedyActor, greedy_actor, observation_and_mask


class PolicyModel(torch.nn.Module):
    """Every agent's greedy policy of one algorithm (any of distmarl's)."""

    def __init__(self, algo: Any) -> None:
        super().__init__()
        self.agents = list(algo.agents)
        built = {a: greedy_actor(algo, a) for a in self.agents}
        #: agent names as ModuleDict keys (which may not hold dots)
        self.keys = {a: f"agent_{i}" for i, a in enumerate(self.agents)}
        self.actors = torch.nn.ModuleDict({self.keys[a]: m for a, (m, _) in built.items()})
        self.feeds = {a: feed for a, (_, feed) in built.items()}

    def actor(self, agent: str) -> GreedyActor:
        """``agent``'s greedy policy: ``(obs[, mask]) -> actions`` as tensors."""
        module = self.actors[self.keys[agent]]
        assert isinstance(module, GreedyActor)
        return module

    @torch.no_grad()
    def forward(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = {}
        for agent, x in obs.items():
            actor = self.actor(agent)
            device = actor.net_device()
            o, mask = observation_and_mask(x)
            o = _tensor(o, device, self.feeds[agent]["obs_dtype"])
            m = None if mask is None or not self.feeds[agent]["masked"] else \
                _tensor(mask, device, "float32")
            out[agent] = actor(o, m).cpu().numpy()
        return out


def _tensor(x: Any, device: torch.device, dtype: str) -> torch.Tensor:
    array = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return torch.from_numpy(np.ascontiguousarray(array, dtype=dtype)).to(device)
