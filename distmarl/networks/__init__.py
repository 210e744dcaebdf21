"""Evolvable networks: an MLP built from plain data, encoder+head networks, their mutations and
``net_config`` resolution (no Ray, no MLflow)."""

from distmarl.networks.evolvable import PARTS, EvolvableNetwork, NetworkArch, make_arch
from distmarl.networks.mlp import ACTIVATIONS, EvolvableMLP, MLPSpec
from distmarl.networks.net_config import AgentNetConfig, NetConfigError, resolve_net_config
from distmarl.networks.surgery import Mutated

__all__ = [
    "ACTIVATIONS", "PARTS", "AgentNetConfig", "EvolvableMLP", "EvolvableNetwork", "MLPSpec",
    "Mutated", "NetConfigError", "NetworkArch", "make_arch", "resolve_net_config",
]
