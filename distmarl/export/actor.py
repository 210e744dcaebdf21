"""One agent's greedy policy as a standalone ``torch.nn.Module``: raw observations in, env
actions out, in torch operations alone, so that TorchScript and ONNX can write it out.

It does what :meth:`~distmarl.algorithms.Algorithm.act` does with ``explore=False`` for one
agent: vector observations flattened to float32 with NaN read as 0, images passed as the env
gives them (the network scales them itself), the acting network, then Box actions
``mid + half * tanh(out)`` reshaped to the space, or Discrete actions the arg-max of the legal
logits plus the space's ``start`` (a row with no legal action counts every action legal).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from distmarl.algorithms.common.space_tensors import MASKED_LOGIT, box_bounds
from distmarl.networks.inputs import MASK_KEY, ImageInput, VectorInput


class GreedyActor(torch.nn.Module):
    """``forward(obs)`` or, for an agent whose observations carry an action mask,
    ``forward(obs, mask)``: ``obs`` ``(B, *obs_shape)``, ``mask`` ``(B, n)`` (any numeric
    type, > 0.5 legal) -> Box float32 ``(B, *action_shape)`` / Discrete int64 ``(B,)``."""

    action_mid: torch.Tensor
    action_half: torch.Tensor

    def __init__(self, net: torch.nn.Module, image: bool, action_space: spaces.Space) -> None:
        super().__init__()
        self.net = copy.deepcopy(net).cpu().eval()
        self.image = image
        self.box = isinstance(action_space, spaces.Box)
        self.action_shape: tuple[int, ...] = ()
        self.start = 0
        if isinstance(action_space, spaces.Box):
            bounds = box_bounds(action_space, torch.device("cpu"))
            self.register_buffer("action_mid", bounds.mid)
            self.register_buffer("action_half", bounds.half)
            self.action_shape = tuple(int(d) for d in action_space.shape)
        elif isinstance(action_space, spaces.Discrete):
            self.start = int(action_space.start)
        else:
            raise ValueError(f"export writes Box and Discrete actions, not {action_space}")

    def net_device(self) -> torch.device:
        """Where the network's parameters are (where inputs must go)."""
        return next(self.net.parameters()).device

    def forward(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.image:
            x = torch.nan_to_num(obs, nan=0.0) if obs.is_floating_point() else obs
        else:
            x = torch.nan_to_num(obs.reshape(obs.shape[0], -1).float(), nan=0.0)
        out = self.net(x)
        if self.box:
            action = self.action_mid + self.action_half * torch.tanh(out)
            return action.reshape((obs.shape[0], *self.action_shape))
        if mask is not None:
            legal = torch.nan_to_num(mask.reshape(mask.shape[0], -1).float(), nan=0.0) > 0.5
            legal = legal | ~legal.any(dim=-1, keepdim=True)
            out = torch.where(legal, out, torch.full_like(out, MASKED_LOGIT))
        return out.argmax(dim=-1) + self.start


def greedy_actor(algo: Any, agent: str) -> tuple[GreedyActor, dict[str, Any]]:
    """``agent``'s :class:`GreedyActor` from ``algo`` and how to feed it: the observation's
    dtype and shape, and whether it takes a mask (a dict observation with ``action_mask``)."""
    reader = algo.readers[agent]
    space = reader.space
    masked = isinstance(space, spaces.Dict) and MASK_KEY in space.spaces
    obs_space = reader.policy_space
    spec = reader.input
    if isinstance(spec, ImageInput):
        image = True
    elif isinstance(spec, VectorInput) and isinstance(obs_space, spaces.Box):
        image = False
    else:
        raise ValueError(f"export reads Box vector and image observations; agent {agent!r}'s "
                         f"network reads {obs_space}")
    actor = GreedyActor(algo.acting_network(agent), image, algo.action_spaces[agent])
    feed = {"obs_dtype": str(np.dtype(obs_space.dtype)), "obs_shape": list(obs_space.shape),
            "masked": masked,
            "mask_size": int(space.spaces[MASK_KEY].shape[0]) if masked else None}
    return actor, feed


def observation_and_mask(x: Any) -> tuple[Any, Any]:
    """An agent's observation as an env gives it, split into the array a greedy actor reads
    and its action mask (None where the observation is a bare array or has no mask)."""
    if isinstance(x, Mapping):
        return x["observation"], x.get(MASK_KEY)
    return x, None
