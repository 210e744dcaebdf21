"""Many networks of one architecture run as one: a bank.

A bank holds ``G`` networks of one :class:`~distmarl.networks.evolvable.NetworkArch` as stacked
parameters, ``name -> (G, ...)`` under the names ``named_parameters()`` gives one network.
:func:`bank_forward` runs network ``g`` on input ``x[g]`` for every ``g`` at once.

MLPs (every head, and vector encoders) run as batched matrix products (``baddbmm``): as many
operations as one network, whatever ``G`` is, and with no per-operation host work beyond
that. This is what a stack of members steps (the members' like networks, and within a member
the agents' like networks, e.g. every agent's critic): for these small networks the host's
per-operation cost, not the arithmetic, is most of an update. Other encoders (CNN,
multi-input) run under ``vmap`` over their modules.

Shapes: ``x`` ``(G, *rows, in_dim)`` (any number of row axes; a CNN or multi-input encoder's
images ``(G, B, *image)`` or a dict of them, one row axis); ``extra``
``(G, *rows, extra_dim)``; out ``(G, *rows, out_dim)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F

from distmarl.networks.evolvable import EvolvableNetwork
from distmarl.networks.mlp import EvolvableMLP, MLPSpec, make_activation

Params = Mapping[str, torch.Tensor]
#: nn.LayerNorm's default
LAYER_NORM_EPS = 1e-5


@functools.cache
def activation_fn(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The activation ``name`` (:data:`~distmarl.networks.mlp.ACTIVATIONS`) as a function,
    in place where torch has that form: it is only ever applied to a layer's fresh output,
    which nothing else reads (a product's backward needs its inputs, not its output)."""
    module = make_activation(name)
    if hasattr(module, "inplace"):
        setattr(module, "inplace", True)  # noqa: B010
    return module.forward


def mlp_forward(spec: MLPSpec, params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """A bank of :class:`EvolvableMLP` of ``spec`` (parameters ``prefix + "linears.<j>..."``)
    on ``x`` ``(G, *rows, in_dim)`` -> ``(G, *rows, out_dim)``; the same arithmetic as
    :meth:`EvolvableMLP.forward` on each network."""
    rows = x.shape[1:-1]
    x = x.reshape(x.shape[0], -1, x.shape[-1])
    act = activation_fn(spec.activation)
    layers = _names(prefix, len(spec.hidden_size))
    for j, (weight, bias, norm_weight, norm_bias) in enumerate(layers):
        x = torch.baddbmm(params[bias].unsqueeze(1), x, params[weight].transpose(1, 2))
        if j < len(layers) - 1:
            if spec.layer_norm:
                x = F.layer_norm(x, (x.shape[-1],), eps=LAYER_NORM_EPS)
                x = torch.addcmul(params[norm_bias].unsqueeze(1), x,
                                  params[norm_weight].unsqueeze(1))
            x = act(x)
        elif spec.activate_output:
            x = act(x)
    return x.reshape(x.shape[0], *rows, x.shape[-1])


@functools.cache
def _names(prefix: str, hidden: int) -> tuple[tuple[str, str, str, str], ...]:
    """Parameter names of an MLP's layers: linear weight and bias, norm weight and bias."""
    return tuple((f"{prefix}linears.{j}.weight", f"{prefix}linears.{j}.bias",
                  f"{prefix}norms.{j}.weight", f"{prefix}norms.{j}.bias")
                 for j in range(hidden + 1))


def bank_forward(template: EvolvableNetwork, params: Params, x: Any,
                 extra: torch.Tensor | None = None) -> torch.Tensor:
    """A bank of networks shaped as ``template`` (only its architecture is read; it may live
    on the meta device) with stacked ``params`` on ``x`` and ``extra`` (see the module
    docstring)."""
    if isinstance(template.encoder, EvolvableMLP):
        z = mlp_forward(template.encoder.spec, params, "encoder.", x)
    else:
        z = _vmapped_encoder(template, params, x)
    if template.extra_dim:
        if extra is None:
            raise ValueError(f"this network needs an extra input of width {template.extra_dim}")
        z = torch.cat([z, extra], dim=-1)
    return mlp_forward(template.head.spec, params, "head.", z)


def _vmapped_encoder(template: EvolvableNetwork, params: Params, x: Any) -> torch.Tensor:
    """A CNN or multi-input encoder bank, ``vmap`` over its module: ``x`` with one row axis
    ``(G, B, ...)`` (or a dict of them) -> ``(G, B, latent)``."""
    encoder = template.encoder
    own = {k[len("encoder."):]: v for k, v in params.items() if k.startswith("encoder.")}
    return vmap(lambda p, inp: functional_call(encoder, p, (inp,)))(own, x)
