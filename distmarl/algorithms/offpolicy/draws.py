"""An off-policy stack's random draws: one uniform tensor per update, from the stack's generator.

An update of a stack draws Gumbel samples for each discrete agent's target action and actor
loss (the Gumbel-softmax) and, for MATD3, standard normal target smoothing for each Box agent.
All of them, for every member, come from one ``torch.rand`` of ``(K, B, width)`` per update
(:class:`StackDraws`), which the step turns into its samples (:meth:`DrawPlan.split`: Gumbel's
``-log(-log(u))``, the normal's inverse distribution function): the host's work per update
does not grow with the members, and a captured step reads its draws as one input.

Each call's stream is seeded from its members' own generators (one number each, per call), so a
run repeats from its seed and from a checkpoint. A member's draws depend on its place in its
stack and on the stack's other members: a member updated alone and the same member in a stack
see different (equally distributed) samples. Tests that compare the two hand both the same
draws (any object with :class:`Draws`' methods).

Shapes: ``K`` members, ``B`` rows (padded); per agent and kind ``(K, B, dim)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from distmarl.algorithms.common.space_tensors import ActionCodec, BoxCodec

if TYPE_CHECKING:
    from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent

Tree = dict[str, Any]
#: how far uniform draws stay from 0 and 1 (both transforms are infinite there)
EDGE = 1e-7


class Draws(Protocol):
    """Where a stack's uniform draws come from."""

    def start_call(self, members: Sequence[OffPolicyMultiAgent]) -> None:
        """A call of the stack's members begins."""

    def uniform(self, shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
        """Uniform draws in [0, 1) of ``shape`` ``(K, B, width)``."""


class StackDraws:
    """The stack's own generator on ``device``, seeded at each call from one number of each
    member's generator (so each member's state, which checkpoints keep, decides the
    stream)."""

    def __init__(self, device: torch.device) -> None:
        self.generator = torch.Generator(device=device)

    def start_call(self, members: Sequence[OffPolicyMultiAgent]) -> None:
        seeds = [int(m._rng.integers(2**62)) for m in members]
        self.generator.manual_seed(int(np.random.SeedSequence(seeds).generate_state(1)[0]))

    def uniform(self, shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator, device=device)


class DrawPlan:
    """Which columns of an update's uniform draws each agent's samples take: per agent, the
    codec's Gumbel samples for its target action (``target``) and for its actor loss
    (``policy``), and with ``smoothed`` the target smoothing of a Box agent (``smooth``)."""

    def __init__(self, agents: Sequence[str], codecs: Mapping[str, ActionCodec],
                 smoothed: bool) -> None:
        self.codecs = codecs
        self.columns: dict[str, dict[str, tuple[int, int]]] = {}
        width = 0
        for a in agents:
            codec = codecs[a]
            kinds = (["target", "policy"] if codec.draws else []) + \
                (["smooth"] if smoothed and isinstance(codec, BoxCodec) else [])
            for kind in kinds:
                self.columns.setdefault(a, {})[kind] = (width, width + codec.dim)
                width += codec.dim
        #: columns of an update's draws (0: the update draws nothing)
        self.width = width

    def split(self, u: torch.Tensor) -> tuple[Tree, Tree]:
        """An update's uniform draws ``u`` ``(K, B, width)`` as samples: per agent, the target
        action's (``codec``: Gumbel, ``smooth``: standard normal) and the actor loss' (``codec``);
        agents that draw nothing are absent."""
        u = u.clamp(EDGE, 1 - EDGE)
        target: Tree = {}
        policy: Tree = {}
        for a, kinds in self.columns.items():
            for kind, (lo, hi) in kinds.items():
                part = u[..., lo:hi]
                if kind == "smooth":
                    target.setdefault(a, {})["smooth"] = math.sqrt(2.0) * torch.erfinv(
                        2.0 * part - 1.0)
                else:
                    (target if kind == "target" else policy).setdefault(a, {})["codec"] = \
                        self.codecs[a].noise_from(part)
        return target, policy
