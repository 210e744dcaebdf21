"""An encoder per part of a dict observation, their outputs concatenated.

::

    {"camera": (B, 64, 64, 3) uint8, "speed": (B, 2)}
        --CNN--> (B, d_camera) ; --MLP--> (B, d_speed) --concat--> (B, d_camera + d_speed)

Each part's encoder is an :class:`~distmarl.networks.cnn.EvolvableCNN` (images) or an
:class:`~distmarl.networks.mlp.EvolvableMLP` (vectors, flattened float). The same class reads the
observations of several agents at once (a centralised critic over image observations: one part
per agent). A mutation changes one part and keeps every other part's weights; the parts' output
widths never change, so whatever reads the concatenation keeps its weights too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from distmarl.networks.cnn import CNNSpec, EvolvableCNN
from distmarl.networks.mlp import EvolvableMLP, MLPSpec

PartSpec = MLPSpec | CNNSpec
PartNet = EvolvableMLP | EvolvableCNN


def part_spec_from_dict(d: dict[str, Any]) -> PartSpec:
    """An MLP or CNN spec from its plain form (a CNN's is tagged ``kind: cnn``)."""
    if d.get("kind") == "cnn":
        return CNNSpec.from_dict(d)
    return MLPSpec.from_dict(d)


def build_part(spec: PartSpec, generator: torch.Generator | None,
               device: str | torch.device) -> PartNet:
    """A freshly initialised part."""
    if isinstance(spec, CNNSpec):
        return EvolvableCNN(spec, generator, device)
    return EvolvableMLP(spec, generator, device)


@dataclass(frozen=True)
class MultiInputSpec:
    """Named parts in a fixed order; the output is their outputs side by side."""

    parts: tuple[tuple[str, PartSpec], ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("a multi-input encoder needs at least one part")
        keys = [k for k, _ in self.parts]
        if len(set(keys)) != len(keys):
            raise ValueError(f"part names repeat: {keys}")

    @property
    def out_dim(self) -> int:
        """Width of the concatenation."""
        return sum(p.out_dim for _, p in self.parts)

    @property
    def depth(self) -> int:
        """The deepest part's depth (mutations draw a layer index below it)."""
        return max(p.depth for _, p in self.parts)

    @property
    def activation(self) -> str:
        """The parts' (shared) activation."""
        return self.parts[0][1].activation

    def part(self, key: str) -> PartSpec:
        """One part's spec."""
        return dict(self.parts)[key]

    def with_part(self, key: str, spec: PartSpec) -> MultiInputSpec:
        """The same spec with part ``key`` replaced."""
        return replace(self, parts=tuple((k, spec if k == key else p) for k, p in self.parts))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, tagged ``kind: multi``."""
        return {"kind": "multi", "parts": [[k, p.to_dict()] for k, p in self.parts]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MultiInputSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(tuple((str(k), part_spec_from_dict(p)) for k, p in d["parts"]))


class MultiInputEncoder(nn.Module):
    """One encoder per part (an ``nn.ModuleDict``, so parameters are named ``parts.<key>.*``)."""

    def __init__(self, spec: MultiInputSpec, generator: torch.Generator | None = None,
                 device: str | torch.device = "cpu",
                 parts: Mapping[str, PartNet] | None = None) -> None:
        super().__init__()
        self.spec = spec
        built = dict(parts) if parts is not None else {
            k: build_part(p, generator, device) for k, p in spec.parts}
        if [k for k, _ in spec.parts] != list(built):
            raise ValueError("parts must follow the spec's order")
        self.parts = nn.ModuleDict(built)

    def part(self, key: str) -> PartNet:
        """One part's encoder."""
        return self.parts[key]  # type: ignore[return-value]

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return next(self.parameters()).device

    def forward(self, x: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``{key: (B, ...)}`` -> ``(B, out_dim)``."""
        return torch.cat([self.part(k)(x[k]) for k, _ in self.spec.parts], dim=-1)
