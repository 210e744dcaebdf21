"""A convolutional encoder whose shape is plain data (:class:`CNNSpec`), for image observations.

Layout for ``channel_size = [c0, c1]``::

    x (B, H, W, C) uint8 | (B, C, H, W) | (B, H, W)  --to float, * scale + offset-->
      (B, C, H, W) -> Conv2d(C, c0, k0, s0, p0) -> act -> Conv2d(c0, c1, k1, s1, p1) -> act
      -> flatten (B, c1 * h1 * w1) -> Linear(., out_dim) -> act -> (B, out_dim)

Images travel as ``uint8`` from the env to the learner's device; the encoder converts them once,
in its first operation, from the observation space's bounds (``(x - low) / (high - low)``), so
no float copy of a batch of images is ever made outside the network. Channels-last input is
permuted as a view (no copy).

Parameter names are positional (``convs.<j>.weight``, ``linear.weight``), as the MLP's are, so a
mutation maps new parameters to old ones with a plain dict
(:mod:`distmarl.networks.cnn_surgery`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, cast

import torch
from torch import nn
from torch.nn import functional as F

from distmarl.networks.mlp import ACTIVATIONS, make_activation

#: How an image arrives: channels last (PettingZoo's and SuperSuit's), channels first, or a
#: single channel without a channel axis (a colour-reduced frame that is not stacked).
Layout = Literal["HWC", "CHW", "HW"]
LAYOUTS: tuple[str, ...] = ("HWC", "CHW", "HW")


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output length of a convolution along one spatial axis."""
    return (size + 2 * padding - kernel) // stride + 1


@dataclass(frozen=True)
class CNNSpec:
    """Everything needed to rebuild an :class:`EvolvableCNN` (weights aside).

    ``in_shape`` is the image as the convolutions see it, ``(C, H, W)``; ``layout`` says how it
    arrives. ``scale`` and ``offset`` map the raw values into about ``[0, 1]`` (``1/255`` and 0
    for ``uint8`` frames). ``min_*``/``max_*`` bound what mutations may do.
    """

    in_shape: tuple[int, int, int]
    out_dim: int
    channel_size: tuple[int, ...]
    kernel_size: tuple[int, ...]
    stride_size: tuple[int, ...]
    padding: tuple[int, ...] = ()
    layout: Layout = "CHW"
    scale: float = 1.0
    offset: float = 0.0
    activation: str = "ReLU"
    min_hidden_layers: int = 1
    max_hidden_layers: int = 4
    min_channel_size: int = 8
    max_channel_size: int = 256
    max_kernel_size: int = 9
    max_stride: int = 4

    def __post_init__(self) -> None:
        ints = lambda xs: tuple(int(x) for x in xs)  # noqa: E731
        object.__setattr__(self, "in_shape", ints(self.in_shape))
        for name in ("channel_size", "kernel_size", "stride_size"):
            object.__setattr__(self, name, ints(getattr(self, name)))
        padding = ints(self.padding) if self.padding else (0,) * len(self.channel_size)
        object.__setattr__(self, "padding", padding)
        self._check()

    def _check(self) -> None:
        n = len(self.channel_size)
        if len(self.in_shape) != 3 or min(self.in_shape) <= 0:
            raise ValueError(f"in_shape must be (C, H, W) with positive sizes, got {self.in_shape}")
        if self.out_dim <= 0:
            raise ValueError(f"out_dim must be positive, got {self.out_dim}")
        if n == 0:
            raise ValueError("a CNN needs at least one conv layer (channel_size is empty)")
        lengths = {"kernel_size": len(self.kernel_size), "stride_size": len(self.stride_size),
                   "padding": len(self.padding)}
        for name, length in lengths.items():
            if length != n:
                raise ValueError(f"{name} has {length} entries, channel_size has {n}: "
                                 "give one per conv layer")
        if min(self.channel_size + self.kernel_size + self.stride_size) <= 0:
            raise ValueError("channel_size, kernel_size and stride_size must be positive")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}; choose from {list(LAYOUTS)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {list(ACTIVATIONS)}")
        self.conv_shapes()

    @property
    def depth(self) -> int:
        """Number of conv layers."""
        return len(self.channel_size)

    def conv_shapes(self) -> list[tuple[int, int, int]]:
        """``(C, H, W)`` after each conv layer; raises naming the layer that leaves no output."""
        _, h, w = self.in_shape
        shapes = []
        for j, (c, k, s, p) in enumerate(zip(self.channel_size, self.kernel_size,
                                             self.stride_size, self.padding)):
            h2, w2 = conv_out(h, k, s, p), conv_out(w, k, s, p)
            if h2 < 1 or w2 < 1:
                raise ValueError(
                    f"conv layer {j} (kernel {k}, stride {s}, padding {p}) leaves no output on "
                    f"{h}x{w} (image {self.in_shape[1]}x{self.in_shape[2]}); use smaller kernels "
                    "or strides, or fewer layers, e.g. kernel_size [3, 3], stride_size [1, 1]")
            h, w = h2, w2
            shapes.append((c, h, w))
        return shapes

    @property
    def flat_dim(self) -> int:
        """Width of the flattened last feature map (the linear layer's input)."""
        return math.prod(self.conv_shapes()[-1])

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (lists, ints, floats, strings), tagged ``kind: cnn``."""
        d = asdict(self)
        for name in ("in_shape", "channel_size", "kernel_size", "stride_size", "padding"):
            d[name] = list(d[name])
        return {"kind": "cnn", **d}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CNNSpec:
        """Inverse of :meth:`to_dict`."""
        fields = {k: v for k, v in d.items() if k != "kind"}
        return cls(**fields)

    def with_layers(self, channel_size: tuple[int, ...], kernel_size: tuple[int, ...],
                    stride_size: tuple[int, ...], padding: tuple[int, ...]) -> CNNSpec:
        """The same spec with other conv layers."""
        return replace(self, channel_size=channel_size, kernel_size=kernel_size,
                       stride_size=stride_size, padding=padding)

    def with_activation(self, activation: str) -> CNNSpec:
        """The same spec with another activation."""
        return replace(self, activation=activation)


class EvolvableCNN(nn.Module):
    """A CNN built from a :class:`CNNSpec`; mutations live in :mod:`distmarl.networks.cnn_surgery`.

    Parameters are initialised on CPU from ``generator`` (PyTorch's default Conv2d/Linear scheme,
    drawn from that generator so a seeded build is reproducible), then moved to ``device``.
    """

    def __init__(
        self,
        spec: CNNSpec,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        self.spec = spec
        ins = (spec.in_shape[0], *spec.channel_size[:-1])
        self.convs = nn.ModuleList(
            nn.Conv2d(i, o, k, s, p) for i, o, k, s, p in zip(
                ins, spec.channel_size, spec.kernel_size, spec.stride_size, spec.padding))
        self.linear = nn.Linear(spec.flat_dim, spec.out_dim)
        self.act = make_activation(spec.activation)
        self._init_parameters(generator)
        self.to(device)

    def _init_parameters(self, generator: torch.Generator | None) -> None:
        """Kaiming-uniform weights and U(+-1/sqrt(fan_in)) biases, as PyTorch's defaults, seeded."""
        with torch.no_grad():
            for layer in self.layers():
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
                fan_in = layer.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                nn.init.uniform_(cast(torch.Tensor, layer.bias), -bound, bound, generator=generator)

    def layers(self) -> list[nn.Conv2d | nn.Linear]:
        """Every conv layer, then the linear layer."""
        return [*self.conv_layers(), self.linear]

    def conv_layers(self) -> list[nn.Conv2d]:
        """The conv layers, input first."""
        return [cast(nn.Conv2d, c) for c in self.convs]

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return self.linear.weight.device

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """Raw images in the spec's layout -> float ``(B, C, H, W)``, scaled."""
        owned = x.dtype != torch.float32  # converting made a new tensor: scale it in place
        x = x.to(torch.float32)
        if self.spec.scale != 1.0:
            x = x.mul_(self.spec.scale) if owned else x * self.spec.scale
            owned = True
        if self.spec.offset != 0.0:
            x = x.add_(self.spec.offset) if owned else x + self.spec.offset
        if self.spec.layout == "HWC":
            return x.permute(0, 3, 1, 2)
        if self.spec.layout == "HW":
            return x.unsqueeze(1)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, *image)`` in the spec's layout, any real dtype -> ``(B, out_dim)`` float."""
        x = self.prepare(x)
        act = self.act.forward
        for conv in self.conv_layers():
            x = act(F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding))
        x = F.linear(x.flatten(1), self.linear.weight, self.linear.bias)
        return act(x)
