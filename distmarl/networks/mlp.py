"""An MLP whose shape is plain data (:class:`MLPSpec`), so it can be rebuilt, mutated and shipped.

Layout for ``hidden_size = [h0, h1]``::

    x (B, in_dim) -> Linear(in, h0) -> [LayerNorm] -> act -> Linear(h0, h1) -> [LayerNorm] -> act
                  -> Linear(h1, out_dim) -> (act if activate_output) -> (B, out_dim)

Parameter names are positional (``linears.<j>.weight``, ``norms.<j>.bias``) so that a mutation can
say "new layer j keeps the overlap of old layer i" with a plain mapping.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

#: Activations a network may use (names as in ``torch.nn``, AgileRL's spelling).
ACTIVATIONS: tuple[str, ...] = (
    "ReLU", "ELU", "GELU", "Tanh", "LeakyReLU", "Sigmoid", "SiLU", "Softplus", "Identity",
)
#: Activations with ``f(f(z)) == f(z)``: an identity-initialised extra layer after them changes
#: nothing, so adding a layer can preserve the output exactly only with these.
IDEMPOTENT_ACTIVATIONS: frozenset[str] = frozenset({"ReLU", "Identity"})


@dataclass(frozen=True)
class MLPSpec:
    """Everything needed to rebuild an :class:`EvolvableMLP` (weights aside).

    ``min_*``/``max_*`` bound what mutations may do (AgileRL's names and meanings).
    ``output_vanish`` scales the output layer's initial weights by 0.1 (small first actions and
    Q-values). ``activate_output`` applies ``activation`` to the output too (used for encoders,
    whose output is a latent feature vector).
    """

    in_dim: int
    out_dim: int
    hidden_size: tuple[int, ...]
    activation: str = "ReLU"
    activate_output: bool = False
    layer_norm: bool = False
    output_vanish: bool = False
    min_hidden_layers: int = 1
    max_hidden_layers: int = 3
    min_mlp_nodes: int = 16
    max_mlp_nodes: int = 500

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden_size", tuple(int(h) for h in self.hidden_size))
        if self.in_dim <= 0 or self.out_dim <= 0:
            raise ValueError(f"in_dim and out_dim must be positive, got {self.in_dim}, {self.out_dim}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {list(ACTIVATIONS)}")
        if any(h <= 0 for h in self.hidden_size):
            raise ValueError(f"hidden sizes must be positive, got {list(self.hidden_size)}")

    @property
    def depth(self) -> int:
        """Number of hidden layers."""
        return len(self.hidden_size)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (lists, ints, strings, bools)."""
        d = asdict(self)
        d["hidden_size"] = list(self.hidden_size)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MLPSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "hidden_size": tuple(d["hidden_size"])})

    def with_hidden(self, hidden_size: tuple[int, ...] | list[int]) -> MLPSpec:
        """The same spec with other hidden sizes."""
        return replace(self, hidden_size=tuple(hidden_size))

    def with_activation(self, activation: str) -> MLPSpec:
        """The same spec with another activation."""
        return replace(self, activation=activation)


def make_activation(name: str) -> nn.Module:
    """``"ReLU"`` -> ``nn.ReLU()``, restricted to :data:`ACTIVATIONS`."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose from {list(ACTIVATIONS)}")
    return getattr(nn, name)()


class EvolvableMLP(nn.Module):
    """An MLP built from an :class:`MLPSpec`; mutations live in :mod:`distmarl.networks.surgery`.

    Parameters are initialised on CPU from ``generator`` (PyTorch's default Linear scheme, drawn
    from that generator so a seeded build is reproducible) and then moved to ``device``.
    """

    def __init__(
        self,
        spec: MLPSpec,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        self.spec = spec
        dims = [spec.in_dim, *spec.hidden_size, spec.out_dim]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.norms = nn.ModuleList(
            nn.LayerNorm(h) for h in (spec.hidden_size if spec.layer_norm else ())
        )
        self.act = make_activation(spec.activation)
        self._init_parameters(generator)
        self.to(device)

    def _init_parameters(self, generator: torch.Generator | None) -> None:
        """PyTorch's Linear init (Kaiming-uniform weights, U(+-1/sqrt(fan_in)) biases), seeded."""
        with torch.no_grad():
            for lin in self.linear_layers():
                nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5), generator=generator)
                bound = 1.0 / math.sqrt(lin.in_features)
                nn.init.uniform_(lin.bias, -bound, bound, generator=generator)
            if self.spec.output_vanish:
                self.linear(-1).weight.mul_(0.1)
                self.linear(-1).bias.mul_(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, in_dim)`` -> ``(B, out_dim)``."""
        # Submodules are applied through F.linear / .forward: no hooks are used, and skipping
        # Module.__call__ saves a third of a small network's time on the CPU.
        # (slicing a ModuleList would build a new one per call)
        *hidden, output = cast("Sequence[nn.Linear]", self.linears)
        act = self.act.forward
        for j, lin in enumerate(hidden):
            x = F.linear(x, lin.weight, lin.bias)
            if self.spec.layer_norm:
                x = self.norms[j].forward(x)
            x = act(x)
        x = F.linear(x, output.weight, output.bias)
        return act(x) if self.spec.activate_output else x

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return self.linear(0).weight.device

    def linear(self, j: int) -> nn.Linear:
        """Linear layer ``j`` (0: the input layer, -1: the output layer)."""
        return cast(nn.Linear, self.linears[j])

    def linear_layers(self) -> list[nn.Linear]:
        """Every linear layer, input to output."""
        return [self.linear(j) for j in range(len(self.linears))]
