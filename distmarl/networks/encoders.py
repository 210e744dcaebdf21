"""Any encoder (MLP, CNN, multi-input) built and mutated through one set of functions.

The evolutionary operators speak in MLP terms (add or remove a layer, add or remove nodes), as
AgileRL's do; here each becomes what it means for the encoder at hand:

============  =====================  ==============================================
operator      MLP                    CNN
============  =====================  ==============================================
add_layer     a hidden layer         a 3x3 "same" conv (the identity when preserving)
remove_layer  the last hidden layer  the last conv
add_nodes     units in a layer       more channels, a larger kernel or a smaller stride
remove_nodes  units in a layer       fewer channels, a smaller kernel or a larger stride
============  =====================  ==============================================

A multi-input encoder applies the operator to one of its parts. Which CNN change or which part is
drawn from ``seed``, so a network and its target (mutated with the same seed) change alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from distmarl.networks import cnn_surgery as cs
from distmarl.networks import surgery as ms
from distmarl.networks.cnn import CNNSpec, EvolvableCNN
from distmarl.networks.mlp import EvolvableMLP, MLPSpec
from distmarl.networks.multi_input import MultiInputEncoder, MultiInputSpec, build_part
from distmarl.networks.surgery import Mutated

EncoderSpec = MLPSpec | CNNSpec | MultiInputSpec
Encoder = EvolvableMLP | EvolvableCNN | MultiInputEncoder
OPS: tuple[str, ...] = ("add_layer", "remove_layer", "add_nodes", "remove_nodes")


def encoder_spec_from_dict(d: dict[str, Any]) -> EncoderSpec:
    """Any encoder spec from its plain form (an MLP's has no ``kind``, as before CNNs existed)."""
    kind = d.get("kind")
    if kind == "multi":
        return MultiInputSpec.from_dict(d)
    if kind == "cnn":
        return CNNSpec.from_dict(d)
    return MLPSpec.from_dict(d)


def build_encoder(spec: EncoderSpec, generator: torch.Generator | None,
                  device: str | torch.device = "cpu") -> Encoder:
    """A freshly initialised encoder."""
    if isinstance(spec, MultiInputSpec):
        return MultiInputEncoder(spec, generator, device)
    return build_part(spec, generator, device)


def can_apply(op: str, spec: EncoderSpec, layer: int) -> bool:
    """Whether ``op`` has anything to do within the spec's bounds."""
    if isinstance(spec, MultiInputSpec):
        return any(can_apply(op, p, layer) for _, p in spec.parts)
    if isinstance(spec, CNNSpec):
        return bool(_cnn_choices(op, spec, layer))
    return {"add_layer": ms.can_add_layer, "remove_layer": ms.can_remove_layer,
            "add_nodes": lambda s: ms.can_add_nodes(s, layer),
            "remove_nodes": lambda s: ms.can_remove_nodes(s, layer)}[op](spec)


def apply(enc: Encoder, op: str, layer: int, num_nodes: int, seed: int,
          preserve_output: bool) -> Mutated[Any]:
    """Run ``op`` on ``enc`` (see the table above); ValueError if it cannot apply."""
    if op not in OPS:
        raise ValueError(f"unknown encoder operation {op!r}; choose from {list(OPS)}")
    if isinstance(enc, MultiInputEncoder):
        return _apply_multi(enc, op, layer, num_nodes, seed, preserve_output)
    gen = torch.Generator().manual_seed(seed)
    if isinstance(enc, EvolvableCNN):
        return _apply_cnn(enc, op, layer, num_nodes, seed, gen, preserve_output)
    if op == "add_layer":
        return ms.add_layer(enc, gen, preserve_output)
    if op == "remove_layer":
        return ms.remove_layer(enc)
    if op == "add_nodes":
        return ms.add_nodes(enc, layer, num_nodes, gen, preserve_output)
    return ms.remove_nodes(enc, layer, num_nodes)


def change_activation(enc: Encoder, activation: str) -> Mutated[Any]:
    """The same weights under another activation (every part of a multi-input encoder)."""
    if isinstance(enc, MultiInputEncoder):
        results = {k: change_activation(enc.part(k), activation) for k, _ in enc.spec.parts}
        return _reassemble(enc, results, {"op": "change_activation", "activation": activation,
                                          "output_preserved": activation == enc.spec.activation})
    if isinstance(enc, EvolvableCNN):
        return cs.change_activation(enc, activation)
    return ms.change_activation(enc, activation)


def _cnn_choices(op: str, spec: CNNSpec, layer: int) -> list[tuple[str, int]]:
    """The CNN changes ``op`` may make: ``(change, value)`` pairs."""
    j = min(layer, spec.depth - 1)
    k, s = spec.kernel_size[j], spec.stride_size[j]
    kernels, strides = cs.kernel_choices(spec, j), cs.stride_choices(spec, j)
    if op == "add_layer":
        return [("add_conv", 0)] if cs.can_add_conv(spec) else []
    if op == "remove_layer":
        return [("remove_conv", 0)] if cs.can_remove_conv(spec) else []
    grow = op == "add_nodes"
    out: list[tuple[str, int]] = []
    if (cs.can_add_channels if grow else cs.can_remove_channels)(spec, j):
        out.append(("channels", 0))
    # one step along each axis: the next larger kernel and smaller stride to grow, and back
    kernel = [v for v in kernels if v > k][:1] if grow else [v for v in kernels if v < k][-1:]
    stride = [v for v in strides if v < s][-1:] if grow else [v for v in strides if v > s][:1]
    return out + [("kernel", v) for v in kernel] + [("stride", v) for v in stride]


def _apply_cnn(enc: EvolvableCNN, op: str, layer: int, num_nodes: int, seed: int,
               gen: torch.Generator, preserve_output: bool) -> Mutated[EvolvableCNN]:
    choices = _cnn_choices(op, enc.spec, layer)
    if not choices:
        raise ValueError(f"{op} does not fit the CNN's bounds ({enc.spec.to_dict()})")
    change, value = choices[int(np.random.default_rng(seed).integers(len(choices)))]
    channels = max(cs.CHANNEL_STEPS[0], num_nodes // 2)  # 16/32/64 nodes -> 8/16/32 channels
    if change == "add_conv":
        return cs.add_conv(enc, gen, preserve_output)
    if change == "remove_conv":
        return cs.remove_conv(enc)
    if change == "kernel":
        return cs.change_kernel(enc, layer, value)
    if change == "stride":
        return cs.change_stride(enc, layer, value)
    if op == "add_nodes":
        return cs.add_channels(enc, layer, channels, gen, preserve_output)
    return cs.remove_channels(enc, layer, channels)


def _apply_multi(enc: MultiInputEncoder, op: str, layer: int, num_nodes: int, seed: int,
                 preserve_output: bool) -> Mutated[MultiInputEncoder]:
    keys = [k for k, p in enc.spec.parts if can_apply(op, p, layer)]
    if not keys:
        raise ValueError(f"{op} fits no part of the multi-input encoder")
    key = keys[int(np.random.default_rng(seed).integers(len(keys)))]
    result = apply(enc.part(key), op, layer, num_nodes, seed + 1, preserve_output)
    return _reassemble(enc, {key: result}, {**result.info, "input": key})


def _reassemble(enc: MultiInputEncoder, results: dict[str, Mutated[Any]],
                info: dict[str, Any]) -> Mutated[MultiInputEncoder]:
    """A new multi-input encoder with the mutated parts, copies of the others, and ``source``."""
    parts: dict[str, Any] = {}
    source: dict[str, str | None] = {}
    for key, _ in enc.spec.parts:
        if key in results:
            parts[key] = results[key].net
            src = results[key].source
        else:
            parts[key] = build_part(enc.part(key).spec, None, enc.device)
            parts[key].load_state_dict(enc.part(key).state_dict())
            src = {n: n for n, _ in parts[key].named_parameters()}
        for n, old in src.items():
            source[f"parts.{key}.{n}"] = f"parts.{key}.{old}" if old is not None else None
    spec = MultiInputSpec(tuple((k, parts[k].spec) for k, _ in enc.spec.parts))
    return Mutated(MultiInputEncoder(spec, parts=parts), source, info)
