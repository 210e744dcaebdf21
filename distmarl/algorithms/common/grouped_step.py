"""One optimiser step for several networks at once, on the sum of their independent losses.

MADDPG/MATD3 update every agent's critic (then every agent's actor) on the same batch, each on
its own loss and with its own Adam. Done one network at a time, each update pays for its own
backward pass, gradient clip and ``Optimizer.step``; for these small networks that overhead is
larger than the arithmetic. :func:`grouped_step` does the same updates with one backward pass
(gradients of ``sum_i loss_i``: network ``i``'s parameters appear in no other loss, so each gets
exactly its own loss's gradient), one norm computation for all the per-network clips, and one
fused Adam kernel call per distinct set of hyperparameters. The optimisers stay ordinary
``torch.optim.Adam`` objects (their state is read and written in place, in their own format),
so checkpoints, mutations and learning-rate changes see no difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.optim import adam as adam_impl

#: clip_grad_norm_'s guard against a zero norm
_CLIP_EPS = 1e-6


def grouped_step(optims: Sequence[torch.optim.Adam], loss: torch.Tensor,
                 max_grad_norm: float) -> None:
    """An Adam step of every optimiser in ``optims`` on ``loss`` (a sum of per-network losses,
    where no optimiser's parameters appear in another one's term).

    Equivalent, up to float rounding, to ``autograd.grad`` of each network's own loss with
    respect to its own parameters, ``clip_grad_norm_(params, max_grad_norm)`` per network (when
    ``max_grad_norm > 0``) and ``opt.step()`` per optimiser. Only parameters are differentiated,
    so other networks in the graph (a critic inside an actor's loss) get no gradient. Each
    optimiser must have a single parameter group. Each parameter's ``.grad`` is left holding
    the (clipped) gradient it stepped on.
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
    _adam_steps(optims, params, per_net)


@torch.no_grad()
def _clip_each(per_net: list[list[torch.Tensor]], max_norm: float) -> None:
    """Scale each network's gradients so that their joint L2 norm is at most ``max_norm``."""
    norms = torch._foreach_norm([g for gs in per_net for g in gs])
    start = 0
    for gs in per_net:
        total = torch.linalg.vector_norm(torch.stack(norms[start:start + len(gs)]))
        start += len(gs)
        torch._foreach_mul_(gs, torch.clamp(max_norm / (total + _CLIP_EPS), max=1.0))


def _adam_steps(optims: Sequence[torch.optim.Adam], params: list[list[torch.Tensor]],
                grads: list[list[torch.Tensor]]) -> None:
    """Adam updates, one functional call per distinct hyperparameter set (fused when the
    optimisers are); an optimiser with options this path does not cover steps on its own."""
    calls: dict[tuple[Any, ...], list[list[torch.Tensor]]] = {}
    for opt, ps, gs in zip(optims, params, grads, strict=True):
        group = opt.param_groups[0]
        if len(opt.param_groups) != 1 or not _plain(group):
            opt.step()
            continue
        key = (group["lr"], *group["betas"], group["eps"], group["weight_decay"],
               bool(group["fused"]), group.get("decoupled_weight_decay", False))
        lists = calls.setdefault(key, [[], [], [], [], []])
        for p, g in zip(ps, gs, strict=True):
            state = opt.state[p]
            if not state:
                _init_state(state, p, bool(group["fused"]))
            for out, value in zip(lists, (p, g, state["exp_avg"], state["exp_avg_sq"],
                                          state["step"]), strict=True):
                out.append(value)
    for (lr, beta1, beta2, eps, wd, fused, decoupled), (ps, gs, m, v, steps) in calls.items():
        adam_impl.adam(ps, gs, m, v, [], steps, fused=fused or None, foreach=None if fused else True,
                       decoupled_weight_decay=decoupled, amsgrad=False, beta1=beta1, beta2=beta2,
                       lr=lr, weight_decay=wd, eps=eps, maximize=False)


def _plain(group: dict[str, Any]) -> bool:
    """A group :func:`_adam_steps` handles: no amsgrad / maximize / capturable / differentiable,
    a float learning rate."""
    return not (group["amsgrad"] or group["maximize"] or group["capturable"]
                or group["differentiable"] or torch.is_tensor(group["lr"]))


def _init_state(state: dict[str, Any], p: torch.Tensor, fused: bool) -> None:
    """Adam's lazy state, as ``torch.optim.Adam`` creates it on a parameter's first step."""
    step_dtype = torch.float32 if fused else torch.get_default_dtype()
    state["step"] = (torch.zeros((), dtype=step_dtype, device=p.device) if fused
                     else torch.tensor(0.0, dtype=step_dtype))
    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
