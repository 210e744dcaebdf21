"""A learner's members learning together: which of them stack, and one call that updates all.

A learner hosting several members asks :func:`plan_stacks` which of them can be updated as
one stacked computation now (the same algorithm, device and network shapes; for PPO also the
same epochs and minibatch size), and its :class:`Stacks` update every member: each stack of two
or more members as one computation (split further by how many batches each member has, or by
its fragments' length), a member alone by its own update (a stack of one, which the member
keeps). Plans are made for every call, so a
member whose architecture was mutated stacks with the members of its new shape (or alone) from
its next update on; a stack whose members are unchanged is kept from call to call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch

from distmarl.algorithms.base import Algorithm, Batch
from distmarl.algorithms.common.stacking import stack_key
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.algorithms.offpolicy.stack import OffPolicyStack
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.algorithms.onpolicy.stack import OnPolicyStack

#: per member: its updates' metrics and (prioritised replay) its rows' new priorities
ReplayResult = tuple[list[dict[str, float]], np.ndarray | None]


def plan_stacks(members: Sequence[Algorithm]) -> list[list[int]]:
    """Indices of ``members`` grouped by :func:`stack_key`, each group in member order, the
    groups in the order of their first member."""
    groups: dict[str, list[int]] = {}
    for i, algo in enumerate(members):
        groups.setdefault(stack_key(algo), []).append(i)
    return list(groups.values())


class Stacks:
    """A learner's stacks, kept from one call to the next: a stack is built once for the
    members it updates (who then live in its slots, :mod:`~distmarl.algorithms.common.slots`)
    and used again while the same members stack together and still live in its slots. A
    member whose networks or optimiser states were replaced since (a mutation, a loaded state
    of another shape) makes the stack be built again from the members' current tensors."""

    def __init__(self) -> None:
        self._kept: dict[tuple[int, ...], OffPolicyStack | OnPolicyStack] = {}
        self._used: dict[tuple[int, ...], OffPolicyStack | OnPolicyStack] = {}

    def replay(self, members: Sequence[OffPolicyMultiAgent], batches: Sequence[Sequence[Batch]],
               weights: Sequence[Sequence[torch.Tensor]] | None = None) -> list[ReplayResult]:
        """Every member's updates on its own ``batches[k]`` (with importance ``weights[k]``
        under prioritised replay, which a run's members all use or none), each stack in one
        computation; per member, what its own ``learn_batches`` returns. Members with no
        batches (a refused sample) learn nothing this call."""
        out: list[ReplayResult] = [([], None) for _ in members]
        for stack in plan_stacks(members):
            for count, ks in _by_count(stack, batches).items():
                if count == 0:
                    continue
                if len(ks) == 1:
                    (k,) = ks
                    out[k] = members[k].learn_batches(batches[k],
                                                      weights[k] if weights is not None else None)
                    continue
                group = cast(OffPolicyStack, self._stack(OffPolicyStack,
                                                           [members[k] for k in ks]))
                ws = None if weights is None else [weights[k] for k in ks]
                for k, result in zip(ks, group.learn_batches([batches[k] for k in ks], ws),
                                     strict=True):
                    out[k] = result
        self._done()
        return out

    def fragments(self, members: Sequence[OnPolicyMultiAgent], fragments: Sequence[Batch | None]
                  ) -> list[dict[str, float] | None]:
        """One PPO update of every member that has a fragment (None: no update), each stack
        in one computation; per member, what its own ``learn`` returns (or None)."""
        out: list[dict[str, float] | None] = [None for _ in members]
        for stack in plan_stacks(members):
            by_length: dict[int, dict[int, Batch]] = {}  # members' learn_step may differ
            for k in stack:
                if (f := fragments[k]) is not None:
                    by_length.setdefault(_steps(f), {})[k] = f
            for present in by_length.values():
                if len(present) == 1:
                    ((k, fragment),) = present.items()
                    out[k] = members[k].learn(fragment)
                    continue
                group = cast(OnPolicyStack, self._stack(OnPolicyStack,
                                                          [members[k] for k in present]))
                for k, metrics in zip(present, group.learn(list(present.values())),
                                      strict=True):
                    out[k] = metrics
        self._done()
        return out

    def _stack(self, kind: type[OffPolicyStack] | type[OnPolicyStack],
               members: Sequence[Any]) -> OffPolicyStack | OnPolicyStack:
        """The kept stack of exactly ``members`` where it is still intact, else a new one."""
        key = tuple(id(m) for m in members)
        stack = self._kept.get(key)
        if stack is None or not isinstance(stack, kind) or not stack.intact():
            stack = kind(members)
        self._used[key] = stack
        return stack

    def _done(self) -> None:
        """Keep the stacks this call used (only those: a member lives in one slot)."""
        self._kept, self._used = self._used, {}


def _steps(fragment: Batch) -> int:
    """A fragment's time steps ``T`` (its tensors are ``(T, E, ...)``)."""
    leaf: Any = fragment
    while isinstance(leaf, dict):
        leaf = next(iter(leaf.values()))
    return int(leaf.shape[0])


def _by_count(stack: Sequence[int], batches: Sequence[Sequence[Any]]) -> dict[int, list[int]]:
    """The stack's members by how many batches each has (a stacked call needs one count)."""
    out: dict[int, list[int]] = {}
    for k in stack:
        out.setdefault(len(batches[k]), []).append(k)
    return out
