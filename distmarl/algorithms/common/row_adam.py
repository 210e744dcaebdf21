"""Eager Adam steps of chosen members of a stack, each on its own rows.

A stack's parameters and Adam states are stacked tensors (:mod:`~distmarl.algorithms.common.
slots`), grouped in sets: the networks that run as one (a bank of ``per_member`` rows per
member), each with its :class:`~distmarl.algorithms.common.stacked_adam.StackedAdam`. The host
knows which members step and at what learning rate, and picks the cheaper of two steps:

- up to :data:`FUSED_MEMBERS` members: torch's own Adam (the fused kernel where the device has
  one) on the rows of the members that step, one call per learning rate, with the arithmetic
  and state of each network's own :class:`~distmarl.algorithms.common.adam.Adam` (the rows'
  views are made once, when the stack is built);
- more members: the masked arithmetic of
  :func:`~distmarl.algorithms.common.stacked_adam.adam_step` on the stacked tensors, each
  member at its own rate, a call per set of as many rows per member: its host work does not
  grow with the members or their rates, where torch's kernel takes every row's tensors one by
  one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.optim import adam as adam_impl

from distmarl.algorithms.common.stacked_adam import Params, StackedAdam, adam_step

#: the most members a stack steps with torch's kernel on their rows (measured on one CPU core,
#: the main job's MADDPG: faster than the masked arithmetic up to 4 members, even at 8, slower
#: at 16)
FUSED_MEMBERS = 8


class RowAdam:
    """Adam on the rows of ``K`` members' stacked parameter sets.

    ``params[i]``: set ``i``'s parameters, name -> ``(K * per_member[i], ...)`` (member
    ``k``'s rows ``k * per_member[i] ... + per_member[i] - 1``); ``adams[i]`` its moments and
    step counts (one ``betas`` and ``eps`` for all sets); ``fused``: whether the device runs
    torch's fused kernel."""

    def __init__(self, params: Sequence[Params], adams: Sequence[StackedAdam],
                 per_member: Sequence[int], members: int, fused: bool) -> None:
        settings = {(a.beta1, a.beta2, a.eps) for a in adams}
        if len(settings) != 1:
            raise ValueError(f"one Adam's betas and eps for every set, got {sorted(settings)}")
        self.beta1, self.beta2, self.eps = settings.pop()
        self.fused = fused
        #: per set and member: its row numbers, and the views of its parameters, moments and
        #: step counts (parameter by parameter, row by row)
        self._params, self._adams = list(params), list(adams)
        self._per_member = list(per_member)
        self._members = members
        self._names = [list(ps) for ps in params]
        self._row_ids: list[list[list[int]]] = []
        self._rows: list[list[list[list[torch.Tensor]]]] = []
        for ps, adam, per in zip(params, adams, per_member, strict=True):
            ids = [[k * per + j for j in range(per)] for k in range(members)]
            with torch.no_grad():  # stepped in place (parameters may be autograd leaves)
                kinds = [[_rows_of(group[name]) for name in ps]
                         for group in (ps, adam.m, adam.v, adam.steps)]
            self._row_ids.append(ids)
            self._rows.append([[[x[row] for x in kind for row in rows_] for kind in kinds]
                               for rows_ in ids])

    @torch.no_grad()
    def step(self, sets: Sequence[int], grads: Sequence[Params],
             lrs: Sequence[Sequence[float]], due: Sequence[bool] | None = None) -> None:
        """One Adam step of the ``due`` members (None: all) on sets ``sets``: ``grads[j]``
        the gradients of set ``sets[j]`` (as its parameters), ``lrs[j][k]`` member ``k``'s
        learning rate for it."""
        grads = [{name: _contiguous(g) for name, g in gs.items()} for gs in grads]
        if self._members > FUSED_MEMBERS:
            self._masked(sets, grads, lrs, due)
            return
        calls: dict[float, list[list[torch.Tensor]]] = {}
        for i, set_grads, set_lrs in zip(sets, grads, lrs, strict=True):
            by_row = [_rows_of(set_grads[name]) for name in self._names[i]]
            for k, lr in enumerate(set_lrs):
                if due is not None and not due[k]:
                    continue
                lists = calls.setdefault(lr, [[], [], [], [], []])
                for out, state in zip(lists[1:], self._rows[i][k], strict=True):
                    out.extend(state)
                lists[0].extend(g[row] for g in by_row for row in self._row_ids[i][k])
        for lr, (gs, ps, ms, vs, steps) in calls.items():
            adam_impl.adam(ps, gs, ms, vs, [], steps, fused=self.fused or None,
                           foreach=None if self.fused else True, decoupled_weight_decay=False,
                           amsgrad=False, beta1=self.beta1, beta2=self.beta2, lr=lr,
                           weight_decay=0.0, eps=self.eps, maximize=False)

    def _masked(self, sets: Sequence[int], grads: Sequence[Params],
                lrs: Sequence[Sequence[float]], due: Sequence[bool] | None) -> None:
        """The step in :func:`adam_step`'s arithmetic, each member's rows at its own rate: one
        call per number of rows per member (and set of rates)."""
        groups: dict[tuple[int, tuple[float, ...]], list[int]] = {}
        for j, i in enumerate(sets):
            groups.setdefault((self._per_member[i], tuple(lrs[j])), []).append(j)
        for (per, _), js in groups.items():
            device = self._params[sets[js[0]]][self._names[sets[js[0]]][0]].device
            lr = torch.tensor([lrs[js[0]][k] for k in range(len(lrs[js[0]])) for _ in range(per)],
                              dtype=torch.float64, device=device)
            mask = None if due is None else torch.tensor(
                [d for d in due for _ in range(per)], device=device)
            adam_step([self._adams[sets[j]] for j in js], [self._params[sets[j]] for j in js],
                      [grads[j] for j in js], lr, mask)


def _contiguous(g: torch.Tensor) -> torch.Tensor:
    """``g`` laid out as its parameter is (a product's gradient may come transposed; the
    fused kernel reads memory as the parameter's layout)."""
    return g if g.is_contiguous() else g.contiguous()


def _rows_of(x: torch.Tensor) -> Sequence[torch.Tensor]:
    """``x``'s rows ``x[0], x[1], ...``; a single row as ``x`` itself (a stack of one
    member's one network steps its whole tensors, with no view made per step)."""
    return (x,) if x.shape[0] == 1 else x.unbind(0)
