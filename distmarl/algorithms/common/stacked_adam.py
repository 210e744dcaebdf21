"""Adam and gradient clipping over stacked parameters ``(K, ...)``: each member its own
learning rate, clip norm, step counts and moments, the arithmetic of
:class:`~distmarl.algorithms.common.adam.Adam` and ``clip_grad_norm_`` (equal to them to float
rounding).

Both work on lists of every parameter of the networks a phase steps, with torch's ``_foreach``
operations: the number of operations dispatched does not grow with the number of parameters
(only a few views per parameter are made on the host), which for these small networks is most
of an update's cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Params = dict[str, torch.Tensor]
#: clip_grad_norm_'s guard against a zero norm
CLIP_EPS = 1e-6


class StackedAdam:
    """Moments ``m`` / ``v`` and step counts (one per member and parameter, ``(K,)``) for the
    stacked parameters of one network; ``betas`` and ``eps`` shared by the members."""

    def __init__(self, m: Params, v: Params, steps: Params, betas: tuple[float, float],
                 eps: float) -> None:
        self.m, self.v, self.steps = m, v, steps
        self.beta1, self.beta2 = betas
        self.eps = eps


@torch.no_grad()
def adam_step(adams: Sequence[StackedAdam], params: Sequence[Params], grads: Sequence[Params],
              lr: torch.Tensor, due: torch.Tensor | None = None) -> None:
    """One Adam step of every member for the networks whose states are ``adams``, their
    ``params`` and ``grads`` (name -> ``(K, ...)``), in place: parameters, moments and step
    counts keep their storage (members alias it, a captured CUDA graph replays on it).
    ``lr`` ``(K,)``; ``due`` ``(K,)`` bool: the members that step (the others keep their
    parameters and state exactly; None: all)."""
    by_settings: dict[tuple[float, float, float], list[list[torch.Tensor]]] = {}
    for adam, net_params, net_grads in zip(adams, params, grads, strict=True):
        lists = by_settings.setdefault((adam.beta1, adam.beta2, adam.eps), [[], [], [], [], []])
        for name, p in net_params.items():
            for out, x in zip(lists, (p, net_grads[name], adam.m[name], adam.v[name],
                                      adam.steps[name]), strict=True):
                out.append(x)
    for (beta1, beta2, eps), (ps, gs, ms, vs, steps) in by_settings.items():
        _step(ps, gs, ms, vs, steps, lr, beta1, beta2, eps, due)


def _step(ps: list[torch.Tensor], gs: list[torch.Tensor], ms: list[torch.Tensor],
          vs: list[torch.Tensor], steps: list[torch.Tensor], lr: torch.Tensor, beta1: float,
          beta2: float, eps: float, due: torch.Tensor | None) -> None:
    if due is None:
        torch._foreach_add_(steps, 1.0)
    else:
        torch._foreach_add_(steps, [due.to(steps[0].dtype)] * len(steps))
        # a member that does not step may have a non-finite gradient: zeros in its place keep
        # its (discarded) arithmetic finite, so that a step of 0 leaves it exactly as it was
        gs = [torch.where(d, g, torch.zeros_like(g))
              for g, d in zip(gs, per_param(due.expand(len(gs), -1), gs), strict=True)]
    # bias corrections in double, as torch's Adam computes them: in float32,
    # 1 - 0.999 ** 1 alone is off by about 1e-4 of itself (a member that has never stepped
    # and does not step now counts as 1: finite arithmetic, discarded)
    t = torch.stack(steps).double().clamp_min(1.0)  # (P, K)
    dtype = ps[0].dtype
    step_size = per_param((lr.double() / (1 - beta1 ** t)).to(dtype), ps)
    c2 = per_param((1 - beta2 ** t).sqrt().to(dtype), ps)
    new_m = torch._foreach_lerp(ms, gs, 1 - beta1)
    new_v = torch._foreach_mul(vs, beta2)
    torch._foreach_addcmul_(new_v, gs, gs, value=1 - beta2)
    denom = torch._foreach_sqrt(new_v)
    torch._foreach_div_(denom, c2)
    torch._foreach_add_(denom, eps)
    update = torch._foreach_div(new_m, denom)
    torch._foreach_mul_(update, step_size)
    if due is None:
        torch._foreach_sub_(ps, update)
        torch._foreach_copy_(ms, new_m)
        torch._foreach_copy_(vs, new_v)
        return
    keep = per_param(due.to(dtype).expand(len(ps), -1), ps)  # 1: steps, 0: stays exactly
    torch._foreach_mul_(update, keep)
    torch._foreach_sub_(ps, update)
    torch._foreach_lerp_(ms, new_m, keep)
    torch._foreach_lerp_(vs, new_v, keep)


@torch.no_grad()
def clip_per_member(parts: Sequence[Sequence[torch.Tensor]], max_norm: torch.Tensor
                    ) -> torch.Tensor:
    """Scale each member's gradients of each part (a list of ``(K, ...)`` gradients: one
    network's, or a policy's with its log-std) so that their joint L2 norm is at most that
    member's ``max_norm`` ``(K,)`` (0: no clip), as ``clip_grad_norm_`` on each member's
    part; in place. Returns ``(K,)``: True where every part's norm is finite."""
    flat = [g for part in parts for g in part]
    one = flat[0].shape[0] == 1
    # each part's norm per member: (parts, K); no index tensor is made on the host (a CUDA
    # graph could not capture its copy to the device)
    if one:  # one member: torch's own per-tensor norms, as clip_grad_norm_ takes them
        total = torch.stack([torch.linalg.vector_norm(torch.stack(torch._foreach_norm(
            list(part)))) for part in parts]).unsqueeze(1)
    else:
        total = torch.stack([
            torch.linalg.vector_norm(torch.cat([g.reshape(g.shape[0], -1) for g in part],
                                               dim=1), dim=1) for part in parts])
    coef = torch.clamp(max_norm / (total + CLIP_EPS), max=1.0)
    coef = torch.where(max_norm > 0, coef, torch.ones_like(coef)).to(flat[0].dtype)
    if one:
        for i, part in enumerate(parts):
            torch._foreach_mul_(list(part), coef[i, 0])
    else:
        rows = [coef[i] for i, part in enumerate(parts) for _ in part]
        torch._foreach_mul_(flat, [r.view((-1,) + (1,) * (g.dim() - 1))
                                   for r, g in zip(rows, flat, strict=True)])
    return torch.isfinite(total).all(dim=0)


def per_param(values: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Row ``i`` of ``values`` ``(P, K)`` shaped to broadcast over ``like[i]`` ``(K, ...)``."""
    return [v.view((-1,) + (1,) * (x.dim() - 1)) for v, x in zip(values.unbind(0), like,
                                                                   strict=True)]
