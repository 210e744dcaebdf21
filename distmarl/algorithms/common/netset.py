"""Named online networks, their target copies and one Adam each: build, swap, save, load.

Names are ``"<role>/<agent>"`` (``actor/speaker_0``, ``critic/speaker_0``, ``critic_2/...``).
Replacing a network after a mutation rebuilds its optimiser and carries Adam's state over where
the parameters overlap (:func:`transfer_adam`), so a grown network does not restart with a cold
optimiser on the weights it kept.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from distmarl.algorithms.common.adam import Adam
from distmarl.networks.evolvable import EvolvableNetwork, NetworkArch
from distmarl.networks.surgery import copy_overlap


class NetworkSet:
    """Online networks addressed by name, each with a target copy and its own Adam optimiser
    (``learning``; otherwise the online networks alone: a policy's, which only acts)."""

    def __init__(self, learning: bool = True) -> None:
        self.learning = learning
        self.online: dict[str, EvolvableNetwork] = {}
        self.target: dict[str, EvolvableNetwork] = {}
        self.optim: dict[str, Adam] = {}

    def add(self, name: str, net: EvolvableNetwork, lr: float) -> None:
        """Register ``net`` with a target copy and a fresh Adam (``learning``)."""
        self.online[name] = net
        if self.learning:
            self.target[name] = _frozen_copy(net)
            self.optim[name] = Adam(net.parameters(), lr=lr)

    def names(self, role: str) -> list[str]:
        """Names of one role (``"actor"``, ``"critic"``...) in registration order."""
        return [n for n in self.online if n.split("/", 1)[0] == role]

    def replace(self, name: str, online: EvolvableNetwork, target: EvolvableNetwork,
                source: dict[str, str | None]) -> None:
        """Swap in mutated networks; Adam keeps its state on overlapping parameters."""
        self.optim[name] = transfer_adam(self.optim[name], self.online[name], online, source)
        self.online[name] = online
        self.target[name] = target.requires_grad_(False)

    def set_lr(self, names: list[str], lr: float) -> None:
        """Change the learning rate of these networks' optimisers in place."""
        for n in names:
            for group in self.optim[n].param_groups:
                group["lr"] = lr

    def arch(self) -> dict[str, dict[str, Any]]:
        """Plain architecture of every online network (targets share it)."""
        return {n: net.arch.to_dict() for n, net in self.online.items()}

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (cloned tensors): architectures, online and target weights, optimisers."""
        return {
            "arch": self.arch(),
            "online": {n: _cloned(net.state_dict()) for n, net in self.online.items()},
            "target": {n: _cloned(net.state_dict()) for n, net in self.target.items()},
            "optim": {n: copy.deepcopy(opt.state_dict()) for n, opt in self.optim.items()},
        }

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        """Load a snapshot, rebuilding networks whose architecture differs from the saved one.
        Without ``learning`` (a policy) only the online networks it has are read: a
        learner's snapshot holds them among others."""
        saved, mine = set(state["arch"]), set(self.online)
        if (saved != mine) if self.learning else not saved >= mine:
            raise ValueError(f"state holds networks {sorted(state['arch'])}, "
                             f"this algorithm has {sorted(self.online)}")
        for name in list(self.online):
            arch_dict = state["arch"][name]
            if self.online[name].arch.to_dict() != arch_dict:
                self._rebuild(name, NetworkArch.from_dict(arch_dict), device)
            self.online[name].load_state_dict(state["online"][name])
            if not self.learning:
                continue
            self.target[name].load_state_dict(state["target"][name])
            # deepcopy: Optimizer.load_state_dict keeps same-device tensors as they are, so two
            # learners loading one snapshot would otherwise share their moment estimates.
            self.optim[name].load_state_dict(copy.deepcopy(state["optim"][name]))

    def _rebuild(self, name: str, arch: NetworkArch, device: torch.device) -> None:
        lr = self.optim[name].param_groups[0]["lr"] if self.learning else 0.0
        net = EvolvableNetwork.build(arch, torch.Generator().manual_seed(0), device)
        self.add(name, net, lr)


def transfer_adam(old_opt: Adam, old_net: torch.nn.Module, new_net: torch.nn.Module,
                  source: dict[str, str | None]) -> Adam:
    """A new Adam over ``new_net`` that keeps ``old_opt``'s state where parameters overlap.

    Per kept parameter: ``step`` is kept; first moments keep the overlap and are 0 elsewhere;
    second moments keep the overlap and take the old tensor's mean elsewhere. (Zero there would
    make the new entries' first steps ~3x larger than their neighbours': bias correction for the
    old ``step`` is already ~1, so ``m / sqrt(v)`` starts near ``0.1 / sqrt(0.001)``.) Entirely
    new parameters (a new layer) start with no state, as in a fresh Adam.
    """
    group = old_opt.param_groups[0]
    new_opt = Adam(new_net.parameters(), lr=group["lr"], betas=group["betas"], eps=group["eps"])
    old_params = dict(old_net.named_parameters())
    for name, param in new_net.named_parameters():
        src = source.get(name)
        old_state = old_opt.state.get(old_params[src]) if src in old_params else None
        if old_state:
            new_opt.state[param] = _resized_state(old_state, param)
    return new_opt


def _resized_state(state: dict[str, Any], param: torch.Tensor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in state.items():
        if not torch.is_tensor(value) or value.dim() == 0:
            out[key] = value.clone() if torch.is_tensor(value) else value
            continue
        fill = value.mean().item() if key.endswith("sq") else 0.0
        resized = torch.full_like(param, fill, memory_format=torch.contiguous_format)
        copy_overlap(resized, value)
        out[key] = resized
    return out


def _frozen_copy(net: EvolvableNetwork) -> EvolvableNetwork:
    return copy.deepcopy(net).requires_grad_(False)


def _cloned(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in sd.items()}
