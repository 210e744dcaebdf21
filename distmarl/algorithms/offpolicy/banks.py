"""How a stack of MADDPG / MATD3 members lays out its networks: in banks.

A bank is a set of networks of one architecture that run as one (:mod:`distmarl.networks.banked`):
every member's networks of one kind, and within a member the agents' networks of that kind
whose architectures agree. Rows are member-major: row ``(k * R + r) * n + i`` is member
``k``'s network of role ``r`` for the bank's agent ``i`` (``R`` roles, ``n`` agents).

- An actor bank holds ``actor/<agent>`` of its agents (``R = 1``): agents whose observations
  and actions have the same shapes share one.
- A critic bank holds every critic role (``critic``, and MATD3's ``critic_2``) of its agents:
  every centralised critic reads the same joint input, so all agents' critics usually share
  one bank, and MATD3's twin minimum is a minimum over the bank's role axis.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from distmarl import tree
from distmarl.networks.evolvable import EvolvableNetwork


@dataclass(frozen=True)
class Bank:
    """One bank's layout: ``roles`` x ``agents`` networks per member, and the template whose
    architecture they share (on the meta device)."""

    kind: str  #: "actor" or "critic"
    roles: tuple[str, ...]
    agents: tuple[str, ...]
    template: EvolvableNetwork
    #: the bank's place in its member's banks (the index of its state in a stack's lists)
    position: int = 0

    @property
    def nets(self) -> list[str]:
        """The networks of one member, in row order."""
        return [f"{r}/{a}" for r in self.roles for a in self.agents]

    @property
    def per_member(self) -> int:
        """Rows per member: ``R * n``."""
        return len(self.roles) * len(self.agents)


def plan_banks(nets: dict[str, EvolvableNetwork], agents: Sequence[str],
               critic_roles: Sequence[str]) -> list[Bank]:
    """The banks of one member's networks ``nets`` (name -> online network): actors by
    architecture, then critics by architecture (an agent's critics of every role must agree,
    as they are built and mutated alike)."""
    banks: list[Bank] = []
    for kind, roles in (("actor", ("actor",)), ("critic", tuple(critic_roles))):
        groups: dict[str, list[str]] = {}
        for a in agents:
            arch = [nets[f"{r}/{a}"].arch.to_dict() for r in roles]
            if any(x != arch[0] for x in arch):
                raise ValueError(f"the critics of agent {a!r} differ in architecture")
            groups.setdefault(json.dumps(arch[0], sort_keys=True), []).append(a)
        for group in groups.values():
            template = copy.deepcopy(nets[f"{roles[0]}/{group[0]}"]).to("meta")
            banks.append(Bank(kind, roles, tuple(group), template, len(banks)))
    return banks


def rows(values: torch.Tensor, bank: Bank) -> torch.Tensor:
    """Per-member values ``(K,)`` as the bank's rows ``(K * R * n,)``."""
    return values.repeat_interleave(bank.per_member)


def stack_agents(xs: dict[str, Any], agents: Sequence[str]) -> Any:
    """Per-agent inputs ``(K, ...)`` (tensors or dicts of them) of ``agents`` as bank rows
    ``(K * n, ...)``: the input itself for one agent."""
    if len(agents) == 1:
        return xs[agents[0]]
    return tree.map(lambda *parts: torch.stack(parts, dim=1).flatten(0, 1),
                    *[xs[a] for a in agents])


def repeat_rows(x: Any, times: int) -> Any:
    """An input ``(K, ...)`` shared by ``times`` rows of each member, as ``(K * times, ...)``."""
    if times == 1:
        return x
    return tree.map(lambda t: t.unsqueeze(1).expand(t.shape[0], times, *t.shape[1:])
                    .flatten(0, 1), x)
