"""A stack's storage, which its members' own tensors alias: each member is a slot.

A stack copies its members' tensors (parameters, target copies, Adam moments and step counts)
once into stacked tensors ``(K, ...)``, then points each member's tensor at its slot
(``tensor.data = stacked[k]``). From then on the stacked update moves the members' own
networks and optimiser states in place: nothing is gathered before an update or written back
after it, and a member's ``state_dict()``, ``get_weights()`` or in-place load reads and writes
its slot.

Whatever replaces a member's tensor instead of writing into it (a mutation builds new
networks, loading a state builds new optimiser moments) leaves the slot behind;
:meth:`Slots.intact` sees that, and the owner builds the stack again from the members'
current tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

#: a member's tensors by a key that names them within the member (network, parameter, kind):
#: one tensor, or a list of like tensors (the member's rows of a bank)
Tensors = Mapping[Any, torch.Tensor | Sequence[torch.Tensor]]


class Slots:
    """Stacked copies of ``K`` members' like-named tensors, which the members then alias.

    ``tensors(member)`` gives a member's current tensors; every member must give the same keys
    and shapes. ``stacked[key]`` is ``(K, *shape)`` for a tensor, ``(K * n, *shape)`` for a
    list of ``n`` (member ``k``'s ``j``-th at row ``k * n + j``)."""

    def __init__(self, members: Sequence[Any], tensors: Callable[[Any], Tensors]) -> None:
        self.members = list(members)
        self._tensors = tensors
        own = [_rows(tensors(m)) for m in self.members]
        with torch.no_grad():
            self.stacked: dict[Any, torch.Tensor] = {
                key: torch.stack([x.detach() for t in own for x in t[key]]).contiguous()
                for key in own[0]}
        for k, t in enumerate(own):
            for key, xs in t.items():
                for j, x in enumerate(xs):
                    x.data = self.stacked[key][k * len(xs) + j]

    def intact(self) -> bool:
        """Whether every member's tensors still alias their slots (nothing replaced them)."""
        for k, m in enumerate(self.members):
            try:
                own = _rows(self._tensors(m))
            except KeyError:  # a tensor the stack holds is gone
                return False
            if own.keys() != self.stacked.keys():
                return False
            for key, xs in own.items():
                for j, x in enumerate(xs):
                    if x.data_ptr() != self.stacked[key][k * len(xs) + j].data_ptr():
                        return False
        return True


def _rows(tensors: Tensors) -> dict[Any, list[torch.Tensor]]:
    return {key: [x] if isinstance(x, torch.Tensor) else list(x) for key, x in tensors.items()}
