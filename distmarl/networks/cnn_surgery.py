"""Architecture mutations of an :class:`EvolvableCNN` that keep what it learned.

The contract is :mod:`distmarl.networks.surgery`'s: each mutation returns a new network (the old
one untouched) and ``source``, for every new parameter the old parameter whose overlap it keeps
(None: entirely new), so an optimiser can carry its state over.

What is kept:
- conv weights keep the leading overlap of their channel axes and the *centred* overlap of their
  kernel (a 5x5 kernel grown from 3x3 keeps the 3x3 in its middle, where it still looks at the
  same pixels around the centre);
- the linear layer after the flatten keeps its weights per ``(channel, row, column)`` of the last
  feature map (the overlap of the old and new maps, from the top-left), not per flat index, so a
  change of the map's size does not scramble which weight reads which position.

Output preservation (``preserve_output=True``): ``add_conv`` appends a 3x3 "same" conv
initialised to the identity (Dirac weights, zero bias): the feature map keeps its size, the
linear layer keeps every weight, and the output is exact when ``act(act(z)) == act(z)`` (ReLU,
Identity). ``add_channels`` gives the new channels zero outgoing weights: exact. Kernel, stride
and removals change the output (``output_preserved: False``).
"""

from __future__ import annotations

from typing import Any, cast

import torch

from distmarl.networks.cnn import CNNSpec, EvolvableCNN, conv_out
from distmarl.networks.mlp import IDEMPOTENT_ACTIVATIONS
from distmarl.networks.surgery import Mutated, copy_overlap

#: How many channels ``add_channels`` / ``remove_channels`` move by (AgileRL's choices).
CHANNEL_STEPS: tuple[int, ...] = (8, 16, 32)


def copy_centred_overlap(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Conv weights ``(out, in, kh, kw)``: leading overlap of the channel axes, centred overlap
    of the kernel axes (in place)."""
    idx_dst: list[slice] = []
    idx_src: list[slice] = []
    for axis, (a, b) in enumerate(zip(dst.shape, src.shape)):
        m = min(a, b)
        if axis < 2:
            idx_dst.append(slice(0, m))
            idx_src.append(slice(0, m))
        else:
            idx_dst.append(slice((a - m) // 2, (a - m) // 2 + m))
            idx_src.append(slice((b - m) // 2, (b - m) // 2 + m))
    with torch.no_grad():
        dst[tuple(idx_dst)] = src[tuple(idx_src)].to(dst.device, dst.dtype)


def copy_flat_overlap(dst: torch.Tensor, src: torch.Tensor,
                      dst_chw: tuple[int, int, int], src_chw: tuple[int, int, int]) -> None:
    """Linear weights ``(L, C*H*W)`` read per ``(c, h, w)``: copy the overlap of the old and new
    feature maps (in place)."""
    d = dst.view(dst.shape[0], *dst_chw)
    s = src.view(src.shape[0], *src_chw)
    copy_overlap(d, s)


def rebuild(old: EvolvableCNN, spec: CNNSpec, conv_map: list[int | None],
            generator: torch.Generator | None) -> tuple[EvolvableCNN, dict[str, str | None]]:
    """A fresh network of ``spec`` keeping the overlap of ``old``'s weights.

    ``conv_map[j]`` is the old conv layer that new conv layer ``j`` inherits from, or None.
    The linear layer always inherits from the old one, position by position.
    """
    new = EvolvableCNN(spec, generator=generator, device=old.device)
    olds = old.conv_layers()
    source: dict[str, str | None] = {}
    for j, (conv, i) in enumerate(zip(new.conv_layers(), conv_map)):
        for leaf in ("weight", "bias"):
            name = f"convs.{j}.{leaf}"
            if i is None:
                source[name] = None
                continue
            src = getattr(olds[i], leaf)
            if leaf == "weight":
                copy_centred_overlap(conv.weight, src)
            else:
                copy_overlap(cast(torch.Tensor, conv.bias), src)
            source[name] = f"convs.{i}.{leaf}"
    copy_flat_overlap(new.linear.weight, old.linear.weight,
                      spec.conv_shapes()[-1], old.spec.conv_shapes()[-1])
    copy_overlap(new.linear.bias, old.linear.bias)
    source["linear.weight"], source["linear.bias"] = "linear.weight", "linear.bias"
    return new, source


def _info(op: str, old: CNNSpec, new: CNNSpec, preserved: bool, **extra: Any) -> dict[str, Any]:
    return {
        "op": op,
        "channel_size_before": list(old.channel_size),
        "channel_size": list(new.channel_size),
        "kernel_size": list(new.kernel_size),
        "stride_size": list(new.stride_size),
        "output_preserved": preserved,
        **extra,
    }


def _fits(spec: CNNSpec, **layers: tuple[int, ...]) -> bool:
    """Whether ``spec`` with these conv layers still leaves every feature map non-empty."""
    _, h, w = spec.in_shape
    for k, s, p in zip(layers.get("kernel_size", spec.kernel_size),
                       layers.get("stride_size", spec.stride_size),
                       layers.get("padding", spec.padding)):
        h, w = conv_out(h, k, s, p), conv_out(w, k, s, p)
        if h < 1 or w < 1:
            return False
    return True


def _layer(spec: CNNSpec, layer: int) -> int:
    if layer < 0:
        raise ValueError(f"layer must be >= 0, got {layer}")
    return min(layer, spec.depth - 1)


def _with(tup: tuple[int, ...], j: int, value: int) -> tuple[int, ...]:
    return (*tup[:j], value, *tup[j + 1:])


# -- layers ---------------------------------------------------------------------------------


def can_add_conv(spec: CNNSpec) -> bool:
    """Room for one more conv layer."""
    return spec.depth < spec.max_hidden_layers


def can_remove_conv(spec: CNNSpec) -> bool:
    """A conv layer can go without breaking ``min_hidden_layers`` (or leaving none)."""
    return spec.depth > max(spec.min_hidden_layers, 1)


def add_conv(net: EvolvableCNN, generator: torch.Generator | None,
             preserve_output: bool = True) -> Mutated[EvolvableCNN]:
    """Append a 3x3, stride 1, padding 1 conv as wide as the last one (the identity when
    ``preserve_output``); the feature map keeps its size."""
    spec = net.spec
    if not can_add_conv(spec):
        raise ValueError(f"cannot add a conv layer: max_hidden_layers={spec.max_hidden_layers} reached")
    new_spec = spec.with_layers((*spec.channel_size, spec.channel_size[-1]),
                                (*spec.kernel_size, 3), (*spec.stride_size, 1), (*spec.padding, 1))
    new, source = rebuild(net, new_spec, [*range(spec.depth), None], generator)
    if preserve_output:
        with torch.no_grad():
            conv = new.conv_layers()[-1]
            torch.nn.init.dirac_(conv.weight)
            torch.nn.init.zeros_(cast(torch.Tensor, conv.bias))
    exact = preserve_output and spec.activation in IDEMPOTENT_ACTIVATIONS
    return Mutated(new, source, _info("add_layer", spec, new_spec, exact, layer=spec.depth))


def remove_conv(net: EvolvableCNN) -> Mutated[EvolvableCNN]:
    """Drop the last conv layer; the linear layer keeps its weights where positions overlap."""
    spec = net.spec
    if not can_remove_conv(spec):
        raise ValueError(f"cannot remove a conv layer: min_hidden_layers={spec.min_hidden_layers} reached")
    new_spec = spec.with_layers(spec.channel_size[:-1], spec.kernel_size[:-1],
                                spec.stride_size[:-1], spec.padding[:-1])
    new, source = rebuild(net, new_spec, list(range(spec.depth - 1)), generator=None)
    return Mutated(new, source, _info("remove_layer", spec, new_spec, False, layer=spec.depth - 1))


# -- channels -------------------------------------------------------------------------------


def can_add_channels(spec: CNNSpec, layer: int) -> bool:
    """Conv layer ``layer`` (clamped to the depth) can still widen."""
    return spec.channel_size[_layer(spec, layer)] < spec.max_channel_size


def can_remove_channels(spec: CNNSpec, layer: int) -> bool:
    """Conv layer ``layer`` (clamped to the depth) can still narrow."""
    return spec.channel_size[_layer(spec, layer)] > spec.min_channel_size


def add_channels(net: EvolvableCNN, layer: int, num: int, generator: torch.Generator | None,
                 preserve_output: bool = True) -> Mutated[EvolvableCNN]:
    """Widen conv layer ``layer`` by up to ``num`` channels (clipped to ``max_channel_size``);
    with ``preserve_output`` the new channels' outgoing weights are 0."""
    spec = net.spec
    j = _layer(spec, layer)
    old_c = spec.channel_size[j]
    added = max(0, min(num, spec.max_channel_size - old_c))
    if added == 0:
        raise ValueError(f"cannot add channels to conv layer {j}: max_channel_size={spec.max_channel_size}")
    new_spec = spec.with_layers(_with(spec.channel_size, j, old_c + added), spec.kernel_size,
                                spec.stride_size, spec.padding)
    new, source = rebuild(net, new_spec, list(range(spec.depth)), generator)
    if preserve_output:
        with torch.no_grad():
            if j + 1 < spec.depth:
                new.conv_layers()[j + 1].weight[:, old_c:] = 0.0
            else:
                c, h, w = new_spec.conv_shapes()[-1]
                new.linear.weight.view(-1, c, h, w)[:, old_c:] = 0.0
    info = _info("add_nodes", spec, new_spec, preserve_output, layer=j, num_nodes=added)
    return Mutated(new, source, info)


def remove_channels(net: EvolvableCNN, layer: int, num: int) -> Mutated[EvolvableCNN]:
    """Drop up to ``num`` trailing channels of conv layer ``layer`` (down to ``min_channel_size``)."""
    spec = net.spec
    j = _layer(spec, layer)
    removed = max(0, min(num, spec.channel_size[j] - spec.min_channel_size))
    if removed == 0:
        raise ValueError(f"cannot remove channels from conv layer {j}: "
                         f"min_channel_size={spec.min_channel_size}")
    new_spec = spec.with_layers(_with(spec.channel_size, j, spec.channel_size[j] - removed),
                                spec.kernel_size, spec.stride_size, spec.padding)
    new, source = rebuild(net, new_spec, list(range(spec.depth)), generator=None)
    info = _info("remove_nodes", spec, new_spec, False, layer=j, num_nodes=removed)
    return Mutated(new, source, info)


# -- kernel and stride ----------------------------------------------------------------------


def kernel_choices(spec: CNNSpec, layer: int) -> list[int]:
    """Kernel sizes other than the current one that conv layer ``layer`` may take (up to
    ``max_kernel_size``, every feature map still non-empty)."""
    j = _layer(spec, layer)
    return [k for k in range(1, spec.max_kernel_size + 1) if k != spec.kernel_size[j]
            and _fits(spec, kernel_size=_with(spec.kernel_size, j, k))]


def stride_choices(spec: CNNSpec, layer: int) -> list[int]:
    """Strides other than the current one that conv layer ``layer`` may take."""
    j = _layer(spec, layer)
    return [s for s in range(1, spec.max_stride + 1) if s != spec.stride_size[j]
            and _fits(spec, stride_size=_with(spec.stride_size, j, s))]


def change_kernel(net: EvolvableCNN, layer: int, kernel: int) -> Mutated[EvolvableCNN]:
    """Conv layer ``layer`` takes kernel size ``kernel``, keeping the centred overlap."""
    return _change_geometry(net, layer, "kernel", kernel)


def change_stride(net: EvolvableCNN, layer: int, stride: int) -> Mutated[EvolvableCNN]:
    """Conv layer ``layer`` takes stride ``stride``; every weight keeps its place."""
    return _change_geometry(net, layer, "stride", stride)


def _change_geometry(net: EvolvableCNN, layer: int, what: str, value: int
                     ) -> Mutated[EvolvableCNN]:
    """Conv layer ``layer``'s kernel size or stride (``what``) becomes ``value``."""
    spec = net.spec
    j = _layer(spec, layer)
    choices = (kernel_choices if what == "kernel" else stride_choices)(spec, j)
    if value not in choices:
        raise ValueError(f"conv layer {j} cannot take {what} {value}: choose from {choices}")
    kernels, strides = spec.kernel_size, spec.stride_size
    before = (kernels if what == "kernel" else strides)[j]
    if what == "kernel":
        kernels = _with(kernels, j, value)
    else:
        strides = _with(strides, j, value)
    new_spec = spec.with_layers(spec.channel_size, kernels, strides, spec.padding)
    new, source = rebuild(net, new_spec, list(range(spec.depth)), generator=None)
    info = _info(f"change_{what}", spec, new_spec, False, layer=j, **{f"{what}_before": before})
    return Mutated(new, source, info)


def change_activation(net: EvolvableCNN, activation: str) -> Mutated[EvolvableCNN]:
    """The same weights under another activation."""
    spec = net.spec
    new_spec = spec.with_activation(activation)
    new, source = rebuild(net, new_spec, list(range(spec.depth)), generator=None)
    info = _info("change_activation", spec, new_spec, activation == spec.activation,
                 activation_before=spec.activation, activation=activation)
    return Mutated(new, source, info)
