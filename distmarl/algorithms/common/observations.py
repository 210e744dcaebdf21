"""Observations -> network input, for every algorithm.

An agent's observation becomes what its encoder reads (:mod:`distmarl.networks.inputs`):

* a vector: flattened float32 ``(B, dim)`` (Discrete: one-hot), NaN placeholders -> 0, as
  :func:`~distmarl.algorithms.common.space_tensors.obs_tensor` makes it;
* an image: the batch as stored, ``(B, *image)`` in the env's dtype (``uint8`` frames stay
  ``uint8`` until the CNN's first operation scales them);
* a dict: ``{part: tensor}`` of the above.

PettingZoo's ``action_mask`` (a key of a dict observation) is not an input; :meth:`ObsReader.mask`
returns it as a bool ``(B, n)`` tensor.

:func:`obs_readers` builds every agent's reader with its ``net_config``'s ``channels_last``
and says once per process how each group's images are read (INFO; WARNING where the layout
is a guess no rule tells, :func:`~distmarl.networks.inputs.ambiguous_layout`).

Centralised critics read every agent's observation: side by side ``(B, sum dim)`` when all are
vectors (the MLP critic as before), otherwise a dict input with one part per agent (per agent
and key for dict observations), read by a multi-input encoder.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from distmarl.agents import group_of
from distmarl.algorithms.common.space_tensors import obs_tensor
from distmarl.networks.inputs import (
    MASK_KEY,
    DictInput,
    ImageInput,
    InputSpec,
    VectorInput,
    ambiguous_layout,
    input_spec,
)
from distmarl.networks.net_config import channels_last_of

Input = torch.Tensor | dict[str, torch.Tensor]
log = logging.getLogger(__name__)
#: layout lines this process has logged (each once)
_said: set[str] = set()


def policy_space(space: spaces.Space) -> spaces.Space:
    """The part of an observation space networks read: a PettingZoo ``Dict(observation=...,
    action_mask=...)`` contributes its ``observation``; other dicts lose only ``action_mask``."""
    if isinstance(space, spaces.Dict) and MASK_KEY in space.spaces:
        rest = {k: s for k, s in space.spaces.items() if k != MASK_KEY}
        return rest["observation"] if list(rest) == ["observation"] else spaces.Dict(rest)
    return space


class ObsReader:
    """How one agent's observations become its network's input (``channels_last``: the
    layout of rank-3 images, None: guessed)."""

    def __init__(self, space: spaces.Space, where: str = "observation",
                 channels_last: bool | None = None) -> None:
        self.space = space
        self.policy_space = policy_space(space)
        self.input: InputSpec = input_spec(self.policy_space, where, channels_last)

    def tensor(self, x: Any, device: torch.device) -> Input:
        """A batch ``(B, ...)`` (array, tensor, or dict) -> network input (see the module). A
        dict with ``observation`` and ``action_mask`` (the env's, or masks from infos folded in
        by the collector) contributes its observation."""
        if isinstance(x, Mapping):
            x = {k: v for k, v in x.items() if k != MASK_KEY}
            if not isinstance(self.input, DictInput) and "observation" in x:
                x = x["observation"]
        return _read(x, self.input, self.policy_space, device)

    def mask(self, x: Any, device: torch.device) -> torch.Tensor | None:
        """The legal actions ``(B, n)`` bool, or None where the observation carries no mask."""
        if not isinstance(x, Mapping) or x.get(MASK_KEY) is None:
            return None
        return mask_tensor(x[MASK_KEY], device)


def obs_readers(observation_spaces: Mapping[str, spaces.Space],
                net_config: Mapping[str, Any] | None) -> dict[str, ObsReader]:
    """Every agent's reader, its images laid out as ``net_config``'s ``channels_last`` says
    (:func:`~distmarl.networks.net_config.channels_last_of`) or guessed; logs how each group's
    images are read (see the module)."""
    layouts = channels_last_of(net_config, list(observation_spaces))
    readers = {a: ObsReader(s, f"agent {a!r}'s observation", layouts[a])
               for a, s in observation_spaces.items()}
    for a, r in readers.items():
        _say_layout(group_of(a), r.input, layouts[a])
    return readers


def _say_layout(group: str, spec: InputSpec, channels_last: bool | None) -> None:
    images = [spec] if isinstance(spec, ImageInput) else (
        [p for _, p in spec.parts if isinstance(p, ImageInput)]
        if isinstance(spec, DictInput) else [])
    for image in images:
        line = f"agent group {group!r}: {image.describe()}"
        if line in _said:
            continue
        _said.add(line)
        if channels_last is not None:
            log.info("%s, as net_config's channels_last says", line)
        elif image.layout != "HW" and ambiguous_layout(image.shape):
            log.warning("%s, a guess: set channels_last: true or false in the group's "
                        "net_config if that is wrong", line)
        else:
            log.info("%s (set channels_last in net_config to change)", line)


def mask_tensor(mask: object, device: torch.device) -> torch.Tensor:
    """An action mask ``(B, n)`` (any numeric / bool array; NaN placeholders count as illegal)
    -> bool; rows with no legal action become all-legal."""
    m = torch.as_tensor(np.asarray(mask) if not torch.is_tensor(mask) else mask, device=device)
    m = m.reshape(m.shape[0], -1)
    m = torch.nan_to_num(m.float(), nan=0.0) > 0.5
    return m | ~m.any(dim=-1, keepdim=True)


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


def zeros_input(spec: InputSpec, n: int, device: torch.device) -> Input:
    """``n`` all-zero rows of an input (what a critic sees of an absent agent)."""
    if isinstance(spec, DictInput):
        return {k: _zeros_leaf(p, n, device) for k, p in spec.parts}
    return _zeros_leaf(spec, n, device)


def _zeros_leaf(spec: VectorInput | ImageInput, n: int, device: torch.device) -> torch.Tensor:
    shape = (spec.dim,) if isinstance(spec, VectorInput) else spec.shape
    return torch.zeros(n, *shape, device=device)


def _tensor(x: Input) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError("a vector input needs tensors, got a dict")
    return x


# -- inputs side by side (centralised critics) ----------------------------------------------


def combined_input(named: Sequence[tuple[str, InputSpec]]) -> InputSpec:
    """Several inputs read together: side by side ``(B, sum dim)`` when all are vectors,
    otherwise one dict input with a part per name (``name/key`` for dict inputs)."""
    specs = [s for _, s in named]
    if all(isinstance(s, VectorInput) for s in specs):
        return VectorInput(sum(s.dim for s in specs if isinstance(s, VectorInput)))
    parts: list[tuple[str, VectorInput | ImageInput]] = []
    for name, spec in named:
        if isinstance(spec, DictInput):
            parts += [(f"{name}/{k}", p) for k, p in spec.parts]
        else:
            parts.append((name, spec))
    return DictInput(tuple(parts))


def combined_tensor(named: Sequence[tuple[str, Input]], spec: InputSpec) -> Input:
    """The inputs of :func:`combined_input`'s ``named`` as ``spec`` reads them."""
    if isinstance(spec, VectorInput):
        return torch.cat([_tensor(x) for _, x in named], dim=-1)
    out: dict[str, torch.Tensor] = {}
    for name, x in named:
        if isinstance(x, dict):
            out.update({f"{name}/{k}": t for k, t in x.items()})
        else:
            out[name] = x
    return out


def joint_input(readers: Mapping[str, ObsReader]) -> InputSpec:
    """What a critic over every agent's observation reads (agents in ``readers``' order)."""
    return combined_input([(a, r.input) for a, r in readers.items()])


def joint_tensor(xs: Mapping[str, Input], agents: Sequence[str], joint: InputSpec) -> Input:
    """Every agent's input (from :meth:`ObsReader.tensor`) as the critic input ``joint``
    (:func:`joint_input`) reads it."""
    return combined_tensor([(a, xs[a]) for a in agents], joint)
