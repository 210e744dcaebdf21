"""One optimiser step for several networks at once, on the sum of their independent losses.

MADDPG/MATD3 update every agent's critic (then every agent's actor) on the same batch, each on
its own loss and with its own Adam. Done one network at a time, each update pays for its own
backward pass, gradient clip and ``Optimizer.step``; for these small networks that overhead is
larger than the arithmetic. :func:`grouped_step` does the same updates with one backward pass
(gradients of ``sum_i loss_i``: network ``i``'s parameters appear in no other loss, so each gets
exactly its own loss's gradient), one norm computation for all the per-network clips, and one
fused Adam kernel call per distinct set of hyperparameters (each network keeps its own
:class:`~distmarl.algorithms.common.adam.Adam` state).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from distmarl.algorithms.common.adam import Adam, adam_steps

#: clip_grad_norm_'s guard against a zero norm
_CLIP_EPS = 1e-6


def grouped_step(optims: Sequence[Adam], loss: torch.Tensor, max_grad_norm: float) -> None:
    """An Adam step of every optimiser in ``optims`` on ``loss`` (a sum of per-network losses,
    where no optimiser's parameters appear in another one's term).

    Equivalent, up to float rounding, to ``autograd.grad`` of each network's own loss with
    respect to its own parameters, ``clip_grad_norm_(params, max_grad_norm)`` per network (when
    ``max_grad_norm > 0``) and ``opt.step()`` per optimiser. Only parameters are differentiated,
    so other networks in the graph (a critic inside an actor's loss) get no gradient. Each
    parameter's ``.grad`` is left holding the (clipped) gradient it stepped on.
    """
    params = [opt.param_groups[0]["params"] for opt in optims]
    flat = [p for ps in params for p in ps]
    grads = list(torch.autograd.grad(loss, flat, allow_unused=True))
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(flat, grads, strict=True)]
    for p, g in zip(flat, grads, strict=True):
        p.grad = g  # left there, clipped, for whoever inspects the last step (as opt.step would)
    per_net: list[list[torch.Tensor]] = []
    start = 0
    for ps in params:
        per_net.append(grads[start:start + len(ps)])
        start += len(ps)
    if max_grad_norm > 0:
        _clip_each(per_net, max_grad_norm)
    adam_steps(optims, per_net)


@torch.no_grad()
def _clip_each(per_net: list[list[torch.Tensor]], max_norm: float) -> None:
    """Scale each network's gradients so that their joint L2 norm is at most ``max_norm``."""
    norms = torch._foreach_norm([g for gs in per_net for g in gs])
    start = 0
    for gs in per_net:
        total = torch.linalg.vector_norm(torch.stack(norms[start:start + len(gs)]))
        start += len(gs)
        torch._foreach_mul_(gs, torch.clamp(max_norm / (total + _CLIP_EPS), max=1.0))
