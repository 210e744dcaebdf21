"""Adam over stacked parameters ``(K, ...)``: each member its own learning rate, step count
and moments, the arithmetic of :class:`~distmarl.algorithms.common.adam.Adam` (torch's fused
and foreach kernels agree with it to float rounding)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from distmarl.algorithms.common.adam import Adam

Params = dict[str, torch.Tensor]


class StackedAdam:
    """Moments ``m`` / ``v`` and step counts (one per member and parameter, ``(K,)``) for the
    stacked parameters of one network; ``betas`` and ``eps`` shared by the members."""

    def __init__(self, m: Params, v: Params, steps: Params, betas: tuple[float, float],
                 eps: float) -> None:
        self.m, self.v, self.steps = m, v, steps
        self.beta1, self.beta2 = betas
        self.eps = eps

    @classmethod
    def gather(cls, optims: Sequence[Adam],
               params: Sequence[Mapping[str, torch.Tensor]]) -> StackedAdam:
        """The states of ``optims`` (one per member, a single parameter group each) over the
        members' parameters ``params`` (name -> tensor, the optimiser's order), stacked; a
        parameter with no state yet (never stepped) starts at zero, as Adam would."""
        group = optims[0].param_groups[0]
        m: Params = {}
        v: Params = {}
        steps: Params = {}
        for name in params[0]:
            states = [opt.state.get(p[name], {}) for opt, p in zip(optims, params, strict=True)]
            like = [p[name] for p in params]
            m[name] = torch.stack([s.get("exp_avg", torch.zeros_like(x))
                                   for s, x in zip(states, like, strict=True)])
            v[name] = torch.stack([s.get("exp_avg_sq", torch.zeros_like(x))
                                   for s, x in zip(states, like, strict=True)])
            steps[name] = torch.tensor([float(s["step"]) if "step" in s else 0.0
                                        for s in states], device=like[0].device)
        beta1, beta2 = group["betas"]
        return cls(m, v, steps, (float(beta1), float(beta2)), float(group["eps"]))

    @torch.no_grad()
    def step(self, params: Params, grads: Params, lr: torch.Tensor,
             due: torch.Tensor | None = None) -> None:
        """One Adam step of every member in place (parameters, moments and step counts keep
        their storage, so a captured CUDA graph of the step stays valid); ``lr`` ``(K,)``;
        ``due`` ``(K,)`` bool: the members that step (the others keep their parameters and
        state; None: all)."""
        for name, p in params.items():
            g = grads[name]
            shape = (-1,) + (1,) * (p.dim() - 1)
            steps = self.steps[name]
            steps.add_(1.0 if due is None else due.to(steps.dtype))
            m = self.m[name].lerp(g, 1 - self.beta1)
            v = self.v[name] * self.beta2 + (1 - self.beta2) * g * g
            # bias corrections in double, as torch's Adam computes them: in float32,
            # 1 - 0.999 ** 1 alone is off by about 1e-4 of itself
            t = steps.double()
            step_size = (lr.double() / (1 - self.beta1 ** t)).to(p.dtype).view(shape)
            c2 = (1 - self.beta2 ** t).sqrt().to(p.dtype).view(shape)
            update = step_size * m / (v.sqrt() / c2 + self.eps)
            if due is None:
                p.sub_(update)
                self.m[name].copy_(m)
                self.v[name].copy_(v)
            else:
                keep = due.view(shape)
                p.copy_(torch.where(keep, p - update, p))
                self.m[name].copy_(torch.where(keep, m, self.m[name]))
                self.v[name].copy_(torch.where(keep, v, self.v[name]))

    def scatter(self, optims: Sequence[Adam],
                params: Sequence[Mapping[str, torch.Tensor]]) -> None:
        """Write member ``k``'s state back into ``optims[k]`` (over its parameters
        ``params[k]``), in the form that optimiser keeps it."""
        for k, (opt, ps) in enumerate(zip(optims, params, strict=True)):
            fused = bool(opt.param_groups[0].get("fused"))
            for name, p in ps.items():
                if float(self.steps[name][k]) == 0.0:
                    continue  # never stepped: no state, as in Adam
                state = opt.state.setdefault(p, {})
                step = self.steps[name][k].detach().clone()
                state["step"] = (step.to(torch.float32) if fused
                                 else step.to(torch.get_default_dtype()).cpu())
                state["exp_avg"] = self.m[name][k].clone()
                state["exp_avg_sq"] = self.v[name][k].clone()
