"""Encoder + head network (AgileRL's ``EvolvableNetwork`` layout) with part-wise mutations.

::

    x (B, in_dim) --encoder MLP--> latent (B, latent_dim) --[concat extra (B, extra_dim)]-->
      --head MLP--> (B, out_dim)

Actors use no ``extra``; centralised critics pass all agents' actions as ``extra``, so actions
enter after the observation encoder (as AgileRL's ``ContinuousQNetwork`` does). Mutations target
one part (``"encoder"`` or ``"head"``); the latent size never changes, so the other part keeps
every weight.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from distmarl.networks import encoders
from distmarl.networks import surgery as mut
from distmarl.networks.cnn_config import cnn_spec
from distmarl.networks.encoders import Encoder, EncoderSpec
from distmarl.networks.inputs import DictInput, ImageInput, InputSpec, VectorInput
from distmarl.networks.mlp import EvolvableMLP, MLPSpec
from distmarl.networks.multi_input import MultiInputSpec, PartSpec
from distmarl.networks.net_config import AgentNetConfig

PARTS: tuple[str, ...] = ("encoder", "head")


@dataclass(frozen=True)
class NetworkArch:
    """Plain description of an :class:`EvolvableNetwork`."""

    encoder: EncoderSpec
    head: MLPSpec
    extra_dim: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form."""
        return {"encoder": self.encoder.to_dict(), "head": self.head.to_dict(),
                "extra_dim": self.extra_dim}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NetworkArch:
        """Inverse of :meth:`to_dict`."""
        return cls(encoders.encoder_spec_from_dict(d["encoder"]), MLPSpec.from_dict(d["head"]),
                   int(d["extra_dim"]))


def make_arch(observed: int | InputSpec, out_dim: int, config: AgentNetConfig,
              extra_dim: int = 0) -> NetworkArch:
    """The architecture for one network reading ``observed`` (a vector's width, or what
    :func:`~distmarl.networks.inputs.input_spec` says) from an agent's resolved ``net_config``.

    The encoder's output (the latent) goes through the encoder's activation; the head's output is
    raw (the algorithm applies tanh / softmax) and starts small (``output_vanish``, default on).
    A dict observation's encoder gives ``latent_dim`` per part.
    """
    enc, head = config["encoder_config"], config["head_config"]
    latent = int(config["latent_dim"])
    encoder = encoder_spec(observed, enc, latent)
    head_spec = MLPSpec(in_dim=encoder.out_dim + extra_dim, out_dim=out_dim,
                        activate_output=False, **_mlp_kwargs(head))
    return NetworkArch(encoder, head_spec, extra_dim)


def encoder_spec(observed: int | InputSpec, cfg: dict[str, Any], latent: int) -> EncoderSpec:
    """The encoder for one observation from a completed ``encoder_config`` of its kind."""
    if isinstance(observed, DictInput):
        parts: list[tuple[str, PartSpec]] = []
        for key, p in observed.parts:
            if isinstance(p, ImageInput):
                parts.append((key, cnn_spec(cfg["cnn_config"][key], p, latent)))
            else:
                parts.append((key, _mlp_encoder(p.dim, cfg["mlp_config"], latent)))
        return MultiInputSpec(tuple(parts))
    if isinstance(observed, ImageInput):
        return cnn_spec(cfg, observed, latent)
    dim = observed.dim if isinstance(observed, VectorInput) else int(observed)
    return _mlp_encoder(dim, cfg, latent)


def _mlp_encoder(in_dim: int, cfg: dict[str, Any], latent: int) -> MLPSpec:
    return MLPSpec(in_dim=in_dim, out_dim=latent, activate_output=True,
                   **{**_mlp_kwargs(cfg), "output_vanish": False})


def _mlp_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    keys = ("activation", "layer_norm", "output_vanish", "min_hidden_layers",
            "max_hidden_layers", "min_mlp_nodes", "max_mlp_nodes")
    return {"hidden_size": tuple(cfg["hidden_size"]), **{k: cfg[k] for k in keys}}


class EvolvableNetwork(nn.Module):
    """An encoder (MLP, CNN or multi-input) and a head MLP; every mutation returns a new network
    (self unchanged)."""

    def __init__(self, encoder: Encoder, head: EvolvableMLP, extra_dim: int = 0) -> None:
        super().__init__()
        if head.spec.in_dim != encoder.spec.out_dim + extra_dim:
            raise ValueError("head input must be the encoder's output width + extra_dim")
        self.encoder = encoder
        self.head = head
        self.extra_dim = extra_dim

    @classmethod
    def build(
        cls,
        arch: NetworkArch,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
    ) -> EvolvableNetwork:
        """A freshly initialised network (encoder drawn first, then head, from ``generator``)."""
        encoder = encoders.build_encoder(arch.encoder, generator, device)
        head = EvolvableMLP(arch.head, generator, device)
        return cls(encoder, head, arch.extra_dim)

    def forward(self, x: Any, extra: torch.Tensor | None = None) -> torch.Tensor:
        """``x``: ``(B, in_dim)``, images ``(B, *image)`` or a dict of them; ``extra
        (B, extra_dim)`` or None -> ``(B, out_dim)``."""
        z = self.encoder(x)
        if self.extra_dim:
            if extra is None:
                raise ValueError(f"this network needs an extra input of width {self.extra_dim}")
            z = torch.cat([z, extra], dim=-1)
        return self.head(z)

    @property
    def arch(self) -> NetworkArch:
        """The current architecture."""
        return NetworkArch(self.encoder.spec, self.head.spec, self.extra_dim)

    @property
    def activation(self) -> str:
        """The (shared) hidden activation."""
        return self.encoder.spec.activation

    def part(self, name: str) -> Encoder:
        """``"encoder"`` or ``"head"``."""
        if name not in PARTS:
            raise ValueError(f"unknown part {name!r}; choose from {list(PARTS)}")
        return getattr(self, name)

    # -- mutations (each returns mut.Mutated with this class as ``net``) -------------------

    def mutate(self, part: str, op: str, layer: int, num_nodes: int, seed: int,
               preserve_output: bool = True) -> mut.Mutated[EvolvableNetwork]:
        """Apply ``op`` (:data:`~distmarl.networks.encoders.OPS`) to ``part``; new weights are
        drawn from ``seed`` (see :func:`distmarl.networks.encoders.apply`)."""
        result = encoders.apply(self.part(part), op, layer, num_nodes, seed, preserve_output)
        return self._with_part(part, result)

    def change_activation(self, activation: str) -> mut.Mutated[EvolvableNetwork]:
        """Both parts switch to ``activation``; every weight is kept."""
        enc = encoders.change_activation(self.encoder, activation)
        head = mut.change_activation(self.head, activation)
        source = {**_prefixed("encoder", enc.source), **_prefixed("head", head.source)}
        info = {"op": "change_activation", "activation_before": self.activation,
                "activation": activation, "output_preserved": activation == self.activation,
                "part": "both"}
        net = EvolvableNetwork(enc.net, head.net, self.extra_dim)
        return mut.Mutated(net, source, info)

    def _with_part(
        self, part: str, result: mut.Mutated[Any]
    ) -> mut.Mutated[EvolvableNetwork]:
        """Put a mutated part back next to a copy of the untouched other part (no shared tensors)."""
        other = "head" if part == "encoder" else "encoder"
        parts = {part: result.net, other: copy.deepcopy(self.part(other))}
        net = EvolvableNetwork(parts["encoder"], parts["head"], self.extra_dim)
        keep = {n: n for n, _ in net.part(other).named_parameters(prefix=other)}
        source = {**_prefixed(part, result.source), **keep}
        return mut.Mutated(net, source, {**result.info, "part": part})


def _prefixed(prefix: str, source: dict[str, str | None]) -> dict[str, str | None]:
    return {f"{prefix}.{k}": (f"{prefix}.{v}" if v is not None else None) for k, v in source.items()}
