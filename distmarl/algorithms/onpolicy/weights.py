"""An on-policy learner's weights as plain data: what a rollout worker loads to act and to record
value estimates, built and read by pure functions.

Layout (:func:`pack_weights`)::

    {"arch": {network name: architecture dict},
     "params": {"policy/<group>/<parameter>": array, "value/<group>/<parameter>": array,
                "log_std/<group>": (dim,) array,             # Box policies only
                "value_norm/<group>": [mean, var, count]},   # float64 running moments
     "hp": {}}

Every array is a numpy copy, so nothing the learner goes on training is shared with the
receiver; the readers return tensors and moments the receiver owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from distmarl.algorithms.common.netset import NetworkSet
from distmarl.algorithms.common.slab import host_arrays
from distmarl.algorithms.onpolicy.value_norm import RunningMoments
from distmarl.networks import EvolvableNetwork, NetworkArch

__all__ = ["load_weights", "log_std_of", "moments_of", "network_from", "network_params",
           "pack_weights"]


def pack_weights(nets: NetworkSet, log_std: Mapping[str, torch.Tensor],
                 moments: Mapping[str, RunningMoments]) -> dict[str, Any]:
    """Every online network's architecture and parameters, each group's log-std and value
    normalisation moments, in the layout of the module docstring (the tensors in one copy
    from the device: :func:`host_arrays`)."""
    params = host_arrays({**{f"{name}/{k}": v for name, net in nets.online.items()
                             for k, v in net.state_dict().items()},
                          **{f"log_std/{g}": p for g, p in log_std.items()}})
    for g, m in moments.items():
        params[f"value_norm/{g}"] = np.array([m.mean, m.var, m.count], dtype=np.float64)
    return {"arch": nets.arch(), "params": params, "hp": {}}


def network_params(weights: Mapping[str, Any], name: str) -> dict[str, torch.Tensor]:
    """The state dict of network ``name`` (e.g. ``policy/agent``) from :func:`pack_weights`
    output, as CPU tensors that own writable copies of the arrays."""
    prefix = f"{name}/"
    return {k[len(prefix):]: torch.from_numpy(np.array(v))
            for k, v in weights["params"].items() if k.startswith(prefix)}


def network_from(weights: Mapping[str, Any], name: str, device: torch.device
                 ) -> EvolvableNetwork:
    """A new network ``name`` with the architecture and parameters in ``weights`` (for a
    receiver whose own network has another architecture)."""
    net = EvolvableNetwork.build(NetworkArch.from_dict(weights["arch"][name]),
                                 torch.Generator().manual_seed(0), device)
    net.load_state_dict(network_params(weights, name))
    return net


def log_std_of(weights: Mapping[str, Any], group: str) -> torch.Tensor:
    """The log-std ``(dim,)`` of ``group``'s Gaussian policy."""
    return torch.as_tensor(np.array(weights["params"][f"log_std/{group}"]))


def moments_of(weights: Mapping[str, Any], group: str) -> dict[str, Any]:
    """``group``'s value normalisation moments, in :meth:`RunningMoments.load_state_dict`'s
    form (float64)."""
    mean, var, count = np.asarray(weights["params"][f"value_norm/{group}"], np.float64)
    return {"mean": mean, "var": var, "count": count}


def load_weights(nets: NetworkSet, log_std: Mapping[str, torch.nn.Parameter],
                 moments: Mapping[str, RunningMoments], weights: Mapping[str, Any], lr: float,
                 device: torch.device) -> None:
    """Load :func:`pack_weights` output into a receiver's networks, log-stds and moments. A
    network whose architecture differs is rebuilt, with a fresh optimiser at ``lr``: this is
    for acting; learners copy whole states."""
    for name, arch in weights["arch"].items():
        if nets.online[name].arch.to_dict() == arch:
            nets.online[name].load_state_dict(network_params(weights, name))
        else:
            nets.add(name, network_from(weights, name, device), lr)
    with torch.no_grad():
        for g, p in log_std.items():
            p.copy_(log_std_of(weights, g))
    for g, m in moments.items():
        m.load_state_dict(moments_of(weights, g))
