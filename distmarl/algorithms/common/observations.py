"""Observations -> network input, for every algorithm.

An agent's observation becomes what its encoder reads (:mod:`distmarl.networks.inputs`):

* a vector: flattened float32 ``(B, dim)`` (Discrete: one-hot), NaN placeholders -> 0, as
  :func:`~distmarl.algorithms.common.space_tensors.obs_tensor` makes it;
* an image: the batch as stored, ``(B, *image)`` in the env's dtype (``uint8`` frames stay
  ``uint8`` until the CNN's first operation scales them);
* a dict: ``{part: tensor}`` of the above.

PettingZoo's ``action_mask`` (a key of a dict observation) is not an input; :meth:`ObsReader.mask`
returns it as a bool ``(B, n)`` tensor.

Centralised critics read every agent's observation: side by side ``(B, sum dim)`` when all are
vectors (the MLP critic as before), otherwise a dict input with one part per agent (per agent
and key for dict observations), read by a multi-input encoder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from gymnasium import spaces

from distmarl.algorithms.common.space_tensors import obs_tensor
from distmarl.networks.inputs import (
    MASK_KEY,
    DictInput,
    ImageInput,
    InputSpec,
    VectorInput,
    input_spec,
)

Input = torch.Tensor | dict[str, torch.Tensor]


def policy_space(space: spaces.Space) -> spaces.Space:
    """The part of an observation space networks read: a PettingZoo ``Dict(observation=...,
    action_mask=...)`` contributes its ``observation``; other dicts lose only ``action_mask``."""
    if isinstance(space, spaces.Dict) and MASK_KEY in space.spaces:
        rest = {k: s for k, s in space.spaces.items() if k != MASK_KEY}
        return rest["observation"] if list(rest) == ["observation"] else spaces.Dict(rest)
    return space


class ObsReader:
    """How one agent's observations become its network's input."""

    def __init__(self, space: spaces.Space, where: str = "observation") -> None:
        self.space = space
        self.policy_space = policy_space(space)
        self.input: InputSpec = input_spec(self.policy_space, where)
        self.masked = isinstance(space, spaces.Dict) and MASK_KEY in space.spaces

    def tensor(self, x: Any, device: torch.device) -> Input:
        """A batch ``(B, ...)`` (array, tensor, or dict) -> network input (see the module)."""
        if self.masked and isinstance(x, Mapping):
            x = x["observation"] if "observation" in x and not isinstance(
                self.input, DictInput) else {k: v for k, v in x.items() if k != MASK_KEY}
        return _read(x, self.input, self.policy_space, device)

    def mask(self, x: Any, device: torch.device) -> torch.Tensor | None:
        """The legal actions ``(B, n)`` bool, or None where the observation carries no mask."""
        if not (self.masked and isinstance(x, Mapping)) or x.get(MASK_KEY) is None:
            return None
        return torch.as_tensor(x[MASK_KEY], device=device) > 0


def _read(x: Any, spec: InputSpec, space: spaces.Space, device: torch.device) -> Input:
    if isinstance(spec, DictInput):
        subs = _subspaces(space)
        return {k: _leaf(_part(x, k), p, subs[k], device) for k, p in spec.parts}
    return _leaf(x, spec, space, device)


def _leaf(x: Any, spec: VectorInput | ImageInput, space: spaces.Space,
          device: torch.device) -> torch.Tensor:
    if isinstance(spec, ImageInput):
        t = torch.as_tensor(x, device=device)
        return torch.nan_to_num(t, nan=0.0) if t.is_floating_point() else t
    return obs_tensor(x, space, device)


def _subspaces(space: spaces.Space) -> dict[str, spaces.Space]:
    if isinstance(space, spaces.Tuple):
        return {str(i): s for i, s in enumerate(space.spaces)}
    if isinstance(space, spaces.Dict):
        return {str(k): s for k, s in space.spaces.items()}
    raise TypeError(f"a dict input needs a Dict or Tuple space, got {space}")


def _part(x: Any, key: str) -> Any:
    return x[int(key)] if isinstance(x, (tuple, list)) else x[key]


def batch_size(x: Input) -> int:
    """Rows of a network input (a tensor, or a dict of tensors with as many rows each)."""
    return int(next(iter(x.values())).shape[0] if isinstance(x, dict) else x.shape[0])


# -- centralised critics -------------------------------------------------------------------


def joint_input(readers: Mapping[str, ObsReader]) -> InputSpec:
    """What a critic over every agent's observation reads (agents in ``readers``' order)."""
    inputs = [r.input for r in readers.values()]
    if all(isinstance(i, VectorInput) for i in inputs):
        return VectorInput(sum(i.dim for i in inputs if isinstance(i, VectorInput)))
    parts: list[tuple[str, VectorInput | ImageInput]] = []
    for agent, spec in zip(readers, inputs):
        if isinstance(spec, DictInput):
            parts += [(f"{agent}/{k}", p) for k, p in spec.parts]
        else:
            parts.append((agent, spec))
    return DictInput(tuple(parts))


def joint_tensor(xs: Mapping[str, Input], agents: Sequence[str], joint: InputSpec) -> Input:
    """Every agent's input (from :meth:`ObsReader.tensor`) as the critic input ``joint``
    (:func:`joint_input`) reads it."""
    if isinstance(joint, VectorInput):
        return torch.cat([_tensor(xs[a]) for a in agents], dim=-1)
    out: dict[str, torch.Tensor] = {}
    for a in agents:
        v = xs[a]
        if isinstance(v, dict):
            out.update({f"{a}/{k}": t for k, t in v.items()})
        else:
            out[a] = v
    return out


def _tensor(x: Input) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError("a vector critic input needs tensors, got a dict")
    return x
