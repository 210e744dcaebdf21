"""How an off-policy stack's networks move once their gradients are known: each network's
gradient clipped to its member's ``max_grad_norm``, an Adam step, and the target copies'
Polyak averaging, for the members whose update is due.

Eager steps use what the host knows for the call (:meth:`BankSteps.set_call`): each member's
own Adam on its rows (:class:`~distmarl.algorithms.common.row_adam.RowAdam`, torch's kernel,
one call per learning rate), no clip where no member clips, one ``tau`` where all share it. The
``static`` and ``graph`` modes step every row in one masked arithmetic that a CUDA graph can
capture (:func:`~distmarl.algorithms.common.stacked_adam.adam_step`: a member not due keeps
its state exactly).

Shapes: a bank's parameters, gradients and per-row settings have ``K * R * n`` rows
(:mod:`~distmarl.algorithms.offpolicy.banks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from distmarl.algorithms.common.row_adam import RowAdam
from distmarl.algorithms.common.stacked_adam import adam_step, clip_per_member
from distmarl.algorithms.offpolicy.banks import Bank, rows

Tree = dict[str, Any]


class BankSteps:
    """The steps of ``banks`` whose stacked state is ``state`` (per bank: ``online``,
    ``target`` and ``adam``), for ``members`` members, in ``mode``; ``fused``: whether the
    device runs torch's fused Adam kernel."""

    def __init__(self, banks: Sequence[Bank], state: Tree, members: int, mode: str,
                 fused: bool) -> None:
        self.banks = list(banks)
        self.mode = mode
        self._adam = RowAdam(state["online"], state["adam"],
                             [bank.per_member for bank in self.banks], members, fused)
        self._lrs: dict[str, list[float]] = {}
        self._tau: float | None = None
        self._clips = True
        self._due: Sequence[bool] = ()

    def set_call(self, hp: Sequence[dict[str, Any]]) -> None:
        """The members' hyperparameters for a call: learning rates per network kind, whether
        any member clips and whether all share one ``tau`` (eager steps' host decisions)."""
        self._lrs = {kind: [float(h[f"lr_{kind}"]) for h in hp] for kind in ("actor", "critic")}
        taus = {float(h["tau"]) for h in hp}
        self._tau = taus.pop() if len(taus) == 1 else None
        self._clips = self.mode != "eager" or any(h["max_grad_norm"] > 0 for h in hp)

    def set_due(self, due: Sequence[bool]) -> None:
        """The members whose actor and target update is due in the coming update (the host's
        view, for eager steps)."""
        self._due = due

    @torch.no_grad()
    def step(self, state: Tree, banks: Sequence[Bank], grads: Sequence[dict[str, torch.Tensor]],
             hp_rows: Sequence[Tree], due: torch.Tensor | None) -> None:
        """Each network's gradients clipped to its member's ``max_grad_norm`` (0: no clip),
        then an Adam step of the ``due`` members' networks (None: all), bank by bank."""
        if self._clips:  # one call for the banks of as many rows per member
            by_rows: dict[int, list[int]] = {}
            for j, bank in enumerate(banks):
                by_rows.setdefault(bank.per_member, []).append(j)
            for js in by_rows.values():
                clip_per_member([list(grads[j].values()) for j in js],
                                hp_rows[banks[js[0]].position]["max_grad_norm"])
        if self.mode == "eager":
            self._adam.step([b.position for b in banks], grads,
                            [self._lrs[b.kind] for b in banks],
                            None if due is None else self._due)
            return
        for bank, gs in zip(banks, grads, strict=True):
            i = bank.position
            adam_step([state["adam"][i]], [state["online"][i]], [gs], hp_rows[i]["lr"],
                      None if due is None else rows(due, bank))

    @torch.no_grad()
    def soft_update(self, state: Tree, hp_rows: Sequence[Tree], due: torch.Tensor) -> None:
        """``target <- target + tau * (online - target)`` for the ``due`` members (the
        others' targets stay exactly: a step of 0)."""
        targets = [t for i in range(len(self.banks)) for t in state["target"][i].values()]
        onlines = [state["online"][i][p] for i in range(len(self.banks))
                   for p in state["target"][i]]
        if self.mode == "eager" and self._tau is not None and all(self._due):
            torch._foreach_lerp_(targets, onlines, self._tau)  # one tau for all (the host knows)
            return
        weights: list[torch.Tensor] = []
        for i, bank in enumerate(self.banks):
            weight = hp_rows[i]["tau"] * rows(due, bank).to(hp_rows[i]["tau"].dtype)
            weights.extend(weight.view((-1,) + (1,) * (t.dim() - 1))
                           for t in state["target"][i].values())
        torch._foreach_lerp_(targets, onlines, weights)
