"""Architecture mutations of an :class:`EvolvableMLP` that keep what it learned.

Each mutation returns a *new* network (the old one is untouched) together with ``source``: for
every parameter of the new network, the name of the old parameter whose leading slice it keeps
(``None`` for a parameter that is entirely new). Everything outside the overlap is freshly
initialised from the given ``torch.Generator``. The same ``source`` lets an optimiser carry its
state over (:mod:`distmarl.algorithms.common.netset`).

Overlap means leading slices: nodes are added and removed at the end of a layer, and layers at the
end of the hidden stack (AgileRL's convention), so old unit ``k`` stays unit ``k``.

Output preservation (``preserve_output=True``):
- ``add_nodes``: the new units' outgoing weights are zero, so the output is unchanged (unless
  LayerNorm renormalises the widened layer).
- ``add_layer``: the new layer is the identity (weight I, bias 0) placed after the last hidden
  layer. Its input is already ``act(...)``, so the output is unchanged when
  ``act(act(z)) == act(z)`` (ReLU, Identity) and there is no LayerNorm; otherwise it is close but
  not equal, and the returned info says ``output_preserved: False``.
"Unchanged" is up to float rounding: a wider matmul may sum the same terms in another order
(differences of ~1e-8 have been seen with add_nodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from distmarl.networks.mlp import IDEMPOTENT_ACTIVATIONS, EvolvableMLP, MLPSpec

NetT = TypeVar("NetT", bound=torch.nn.Module)


@dataclass(frozen=True)
class Mutated(Generic[NetT]):
    """A mutation's result: the new network, where its weights came from, and what changed."""

    net: NetT  # EvolvableMLP here, EvolvableNetwork for its part-wise mutations
    #: new parameter name -> old parameter name whose overlap it keeps (None: all new)
    source: dict[str, str | None]
    info: dict[str, Any]


def copy_overlap(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst[:a, :b] = src[:a, :b]`` over the leading overlap of every dimension (in place)."""
    idx = tuple(slice(0, min(a, b)) for a, b in zip(dst.shape, src.shape))
    with torch.no_grad():
        dst[idx] = src[idx].to(dst.device, dst.dtype)


def rebuild(
    old: EvolvableMLP,
    spec: MLPSpec,
    linear_map: list[int | None],
    generator: torch.Generator | None,
) -> tuple[EvolvableMLP, dict[str, str | None]]:
    """A fresh network of ``spec`` that keeps the overlap of ``old``'s weights.

    ``linear_map[j]`` is the old linear layer that new linear layer ``j`` inherits from (its
    LayerNorm, for hidden layers, follows the same mapping), or None for a brand-new layer.
    """
    new = EvolvableMLP(spec, generator=generator, device=old.device)
    old_params = dict(old.named_parameters())
    source: dict[str, str | None] = {}
    for name, param in new.named_parameters():
        kind, j, leaf = name.split(".")  # "linears", "3", "weight"
        i = linear_map[int(j)]
        src = f"{kind}.{i}.{leaf}" if i is not None else None
        if src is not None and src in old_params:
            copy_overlap(param, old_params[src])
        else:
            src = None
        source[name] = src
    return new, source


def _info(op: str, old: MLPSpec, new: MLPSpec, preserved: bool, **extra: Any) -> dict[str, Any]:
    return {
        "op": op,
        "hidden_size_before": list(old.hidden_size),
        "hidden_size": list(new.hidden_size),
        "output_preserved": preserved,
        **extra,
    }


def can_add_layer(spec: MLPSpec) -> bool:
    """Room for one more hidden layer."""
    return spec.depth < spec.max_hidden_layers


def can_remove_layer(spec: MLPSpec) -> bool:
    """A hidden layer can go without breaking ``min_hidden_layers``."""
    return spec.depth > max(spec.min_hidden_layers, 1)


def add_layer(
    net: EvolvableMLP, generator: torch.Generator | None, preserve_output: bool = True
) -> Mutated[EvolvableMLP]:
    """Append a hidden layer as wide as the last one (the identity when ``preserve_output``)."""
    spec = net.spec
    if not can_add_layer(spec):
        raise ValueError(f"cannot add a layer: max_hidden_layers={spec.max_hidden_layers} reached")
    if spec.depth == 0:
        raise ValueError("cannot add a layer to an MLP without hidden layers")
    k = spec.depth  # index of the new linear layer
    new_spec = spec.with_hidden([*spec.hidden_size, spec.hidden_size[-1]])
    linear_map: list[int | None] = [*range(k), None, k]
    new, source = rebuild(net, new_spec, linear_map, generator)
    exact = preserve_output and spec.activation in IDEMPOTENT_ACTIVATIONS and not spec.layer_norm
    if preserve_output:
        with torch.no_grad():
            layer = new.linear(k)
            layer.weight.copy_(torch.eye(layer.out_features, device=layer.weight.device))
            layer.bias.zero_()
    return Mutated(new, source, _info("add_layer", spec, new_spec, exact, layer=k))


def remove_layer(net: EvolvableMLP) -> Mutated[EvolvableMLP]:
    """Drop the last hidden layer; the output layer keeps the overlap of its old weights."""
    spec = net.spec
    if not can_remove_layer(spec):
        raise ValueError(f"cannot remove a layer: min_hidden_layers={spec.min_hidden_layers} reached")
    k = spec.depth - 1  # index of the hidden layer that goes
    new_spec = spec.with_hidden(spec.hidden_size[:-1])
    linear_map: list[int | None] = [*range(k), k + 1]
    new, source = rebuild(net, new_spec, linear_map, generator=None)
    return Mutated(new, source, _info("remove_layer", spec, new_spec, False, layer=k))


def add_nodes(
    net: EvolvableMLP,
    layer: int,
    num_nodes: int,
    generator: torch.Generator | None,
    preserve_output: bool = True,
) -> Mutated[EvolvableMLP]:
    """Widen hidden layer ``layer`` by up to ``num_nodes`` (clipped to ``max_mlp_nodes``).

    New units get fresh incoming weights; with ``preserve_output`` their outgoing weights are 0.
    """
    spec = net.spec
    layer = _check_layer(spec, layer)
    added = max(0, min(num_nodes, spec.max_mlp_nodes - spec.hidden_size[layer]))
    if added == 0:
        raise ValueError(f"cannot add nodes to layer {layer}: max_mlp_nodes={spec.max_mlp_nodes}")
    hidden = list(spec.hidden_size)
    hidden[layer] += added
    new_spec = spec.with_hidden(hidden)
    new, source = rebuild(net, new_spec, list(range(spec.depth + 1)), generator)
    if preserve_output:
        with torch.no_grad():
            new.linear(layer + 1).weight[:, spec.hidden_size[layer]:] = 0.0
    exact = preserve_output and not spec.layer_norm
    info = _info("add_nodes", spec, new_spec, exact, layer=layer, num_nodes=added)
    return Mutated(new, source, info)


def remove_nodes(net: EvolvableMLP, layer: int, num_nodes: int) -> Mutated[EvolvableMLP]:
    """Drop up to ``num_nodes`` trailing units of hidden layer ``layer`` (down to ``min_mlp_nodes``)."""
    spec = net.spec
    layer = _check_layer(spec, layer)
    removed = max(0, min(num_nodes, spec.hidden_size[layer] - spec.min_mlp_nodes))
    if removed == 0:
        raise ValueError(f"cannot remove nodes from layer {layer}: min_mlp_nodes={spec.min_mlp_nodes}")
    hidden = list(spec.hidden_size)
    hidden[layer] -= removed
    new_spec = spec.with_hidden(hidden)
    new, source = rebuild(net, new_spec, list(range(spec.depth + 1)), generator=None)
    info = _info("remove_nodes", spec, new_spec, False, layer=layer, num_nodes=removed)
    return Mutated(new, source, info)


def change_activation(net: EvolvableMLP, activation: str) -> Mutated[EvolvableMLP]:
    """The same weights under another activation."""
    spec = net.spec
    new_spec = spec.with_activation(activation)
    new, source = rebuild(net, new_spec, list(range(spec.depth + 1)), generator=None)
    info = _info("change_activation", spec, new_spec, activation == spec.activation,
                 activation_before=spec.activation, activation=activation)
    return Mutated(new, source, info)


def can_add_nodes(spec: MLPSpec, layer: int) -> bool:
    """Hidden layer ``layer`` (clamped to the depth) can still grow."""
    return spec.depth > 0 and spec.hidden_size[min(layer, spec.depth - 1)] < spec.max_mlp_nodes


def can_remove_nodes(spec: MLPSpec, layer: int) -> bool:
    """Hidden layer ``layer`` (clamped to the depth) can still shrink."""
    return spec.depth > 0 and spec.hidden_size[min(layer, spec.depth - 1)] > spec.min_mlp_nodes


def _check_layer(spec: MLPSpec, layer: int) -> int:
    """Clamp ``layer`` to the deepest hidden layer (AgileRL's rule); error without hidden layers."""
    if spec.depth == 0:
        raise ValueError("the MLP has no hidden layers")
    if layer < 0:
        raise ValueError(f"layer must be >= 0, got {layer}")
    return min(layer, spec.depth - 1)
