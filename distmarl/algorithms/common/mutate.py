"""Evolutionary mutations applied to every network of an algorithm (the HPO hooks' "how").

Every random choice comes from the ``numpy.random.Generator`` passed in; weight initialisation of
new parts uses a ``torch.Generator`` seeded from it. A network and its target get the same
mutation with the same seed, so new parts start equal in both and the target keeps its own
(lagging) values on the overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from distmarl.algorithms.common.netset import NetworkSet
from distmarl.networks import encoders
from distmarl.networks.encoders import EncoderSpec
from distmarl.networks.evolvable import PARTS
from distmarl.networks.mlp import ACTIVATIONS

ARCH_KINDS: tuple[str, ...] = ("add_layer", "remove_layer", "add_node", "remove_node")
#: how many nodes one node mutation adds or removes (AgileRL's choices)
NODE_CHOICES: tuple[int, ...] = (16, 32, 64)
#: AgileRL's default ``activation_selection``
DEFAULT_ACTIVATION_CHOICES: tuple[str, ...] = ("ReLU", "ELU", "GELU")

# AgileRL's classic parameter mutation: on a random subset of weight matrices, up to 10% of the
# entries get N(0, (sd*|w|)^2) added; 5% of those a "super" mutation (10x), 5% a reset to N(0, 1).
_MUTATION_FRAC, _SUPER_PROB, _RESET_PROB, _SUPER_STRENGTH, _MAG_LIMIT = 0.1, 0.05, 0.10, 10.0, 1e6


def mutate_architecture(nets: NetworkSet, kind: str, rng: np.random.Generator,
                        preserve_output: bool, reference: str) -> dict[str, Any]:
    """Apply ``kind`` to the same part (``encoder``/``head``) of every network and its target.

    The part, the hidden layer (clamped to each network's depth) and the node count are drawn
    once, sizing on ``reference`` (the first actor). Where a network is at its layer bound,
    ``add_layer``/``remove_layer`` fall back to adding/removing nodes (as AgileRL's add_layer
    does); a network that can change neither way is left as it is and reported with ``op: None``.
    """
    if kind not in ARCH_KINDS:
        raise ValueError(f"unknown architecture mutation {kind!r}; choose from {list(ARCH_KINDS)}")
    part = str(rng.choice(PARTS))
    layer = int(rng.integers(0, nets.online[reference].part(part).spec.depth))
    num_nodes = int(rng.choice(NODE_CHOICES))
    seed = int(rng.integers(0, 2**62))
    changes: dict[str, Any] = {}
    for i, name in enumerate(nets.online):
        op = _plan(kind, nets.online[name].part(part).spec, layer)
        if op is None:
            changes[name] = {"op": None, "reason": f"{part} is at its bounds for {kind}"}
            continue
        args = (part, op, layer, num_nodes, seed + i, preserve_output)
        online = nets.online[name].mutate(*args)
        target = nets.target[name].mutate(*args)
        nets.replace(name, online.net, target.net, online.source)
        changes[name] = online.info
    return {"kind": kind, "part": part, "layer": layer, "num_nodes": num_nodes,
            "preserve_output": preserve_output, "networks": changes}


def _plan(kind: str, spec: EncoderSpec, layer: int) -> str | None:
    """The operation to run on one part, after fallbacks; None if nothing fits the bounds."""
    grow = "add_nodes" if encoders.can_apply("add_nodes", spec, layer) else None
    shrink = "remove_nodes" if encoders.can_apply("remove_nodes", spec, layer) else None
    if kind == "add_layer":
        return "add_layer" if encoders.can_apply("add_layer", spec, layer) else grow
    if kind == "remove_layer":
        return "remove_layer" if encoders.can_apply("remove_layer", spec, layer) else shrink
    return grow if kind == "add_node" else shrink


def mutate_activation(nets: NetworkSet, rng: np.random.Generator, reference: str,
                      choices: Sequence[str] | None = None) -> dict[str, Any]:
    """Switch every network (and target) to one new activation drawn from ``choices``."""
    choices = list(choices or DEFAULT_ACTIVATION_CHOICES)
    unknown = [c for c in choices if c not in ACTIVATIONS]
    if unknown:
        raise ValueError(f"unknown activations {unknown}; choose from {list(ACTIVATIONS)}")
    current = nets.online[reference].activation
    options = [c for c in choices if c != current]
    if not options:
        raise ValueError(f"no activation other than the current {current!r} in {choices}")
    new = str(rng.choice(options))
    for name in list(nets.online):
        online = nets.online[name].change_activation(new)
        target = nets.target[name].change_activation(new)
        nets.replace(name, online.net, target.net, online.source)
    return {"kind": "activation", "activation_before": current, "activation": new,
            "networks": list(nets.online)}


@torch.no_grad()
def mutate_parameters(nets: NetworkSet, names: list[str], mutation_sd: float,
                      rng: np.random.Generator) -> dict[str, Any]:
    """AgileRL's classic parameter mutation on the online networks ``names`` (the actors).

    Targets and Adam state are left alone: the target is a slow average that follows the
    perturbed actor through soft updates, and the shapes are unchanged.
    """
    if mutation_sd < 0:
        raise ValueError(f"mutation_sd must be >= 0, got {mutation_sd}")
    changes: dict[str, Any] = {}
    for name in names:
        params = dict(nets.online[name].named_parameters())
        keys = [k for k, p in params.items() if p.dim() == 2]
        chosen = sorted(rng.choice(keys, size=int(rng.integers(1, len(keys) + 1)), replace=False))
        changes[name] = {str(k): _perturb(params[k], mutation_sd, rng) for k in chosen}
    return {"kind": "parameters", "mutation_sd": mutation_sd, "networks": changes}


def _perturb(weight: torch.Tensor, sd: float, rng: np.random.Generator) -> int:
    """Mutate a random subset of ``weight`` in place; returns how many entries changed."""
    n = weight.numel()
    count = int(rng.integers(1, math.ceil(_MUTATION_FRAC * n) + 1))
    idx = rng.choice(n, size=count, replace=False)
    u, z = rng.random(count), rng.standard_normal(count)
    flat = weight.view(-1)
    vals = flat[torch.as_tensor(idx, device=weight.device)].cpu().double().numpy()
    strength = np.where(u < _SUPER_PROB, _SUPER_STRENGTH, sd)
    new = np.where((u >= _SUPER_PROB) & (u < _RESET_PROB), z, vals + z * np.abs(strength * vals))
    new = np.clip(new, -_MAG_LIMIT, _MAG_LIMIT)
    flat[torch.as_tensor(idx, device=weight.device)] = torch.as_tensor(
        new, dtype=weight.dtype, device=weight.device)
    return count
