"""Adam's state for one network, without ``torch.optim``'s optimiser objects.

Creating a ``torch.optim.Optimizer`` imports ``torch._dynamo`` (its methods are wrapped to
keep the compiler out), which costs every process that builds an algorithm more than a second
of start-up: rollout workers, learners, evaluation, a CLI run. :class:`Adam` holds the same
state; the learner's stack steps it (:mod:`~distmarl.algorithms.common.row_adam`: torch's
functional Adam, the fused kernel where the device has one).

Its attributes and ``state_dict()`` have ``torch.optim.Adam``'s layout (``param_groups`` with
one group; ``state[param]`` holding ``step``, ``exp_avg`` and ``exp_avg_sq``), so checkpoints
written with ``torch.optim.Adam`` load into it and the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

#: devices torch's fused Adam kernel runs on
FUSED_DEVICES = ("cpu", "cuda")
#: the group settings ``torch.optim.Adam`` records, in a state_dict's ``param_groups``
_GROUP_DEFAULTS: dict[str, Any] = {"weight_decay": 0, "amsgrad": False, "maximize": False,
                                   "foreach": None, "capturable": False,
                                   "differentiable": False, "decoupled_weight_decay": False}


class Adam:
    """Adam over ``params`` (one parameter group): each parameter's state is created on its
    first step, as ``torch.optim.Adam`` does; ``lr`` may change between steps
    (``param_groups[0]["lr"]``)."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        params = list(params)
        device = params[0].device.type if params else "cpu"
        self.param_groups: list[dict[str, Any]] = [{
            "params": params, "lr": float(lr), "betas": (float(betas[0]), float(betas[1])),
            "eps": float(eps), **_GROUP_DEFAULTS, "fused": device in FUSED_DEVICES}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    @property
    def params(self) -> list[torch.Tensor]:
        return self.param_groups[0]["params"]

    def state_of(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """``p``'s state, created (zero moments, step 0) where it has none yet."""
        state = self.state.get(p)
        if not state:
            fused = bool(self.param_groups[0]["fused"])
            state = self.state[p] = {
                "step": _step_tensor(0.0, p, fused),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        return state

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam.state_dict()``'s layout: state by parameter index, one group."""
        index = {p: i for i, p in enumerate(self.params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {"state": {index[p]: dict(s) for p, s in self.state.items() if s},
                "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict` output (or ``torch.optim.Adam``'s): the moments copied to
        the parameters' device and dtype, the rate, betas and eps of its group. A parameter
        that has a state of the same shape already is written in place (a stack holding it
        keeps it: a copy between members is a copy into its slot)."""
        (group,) = state["param_groups"]
        if len(group["params"]) != len(self.params):
            raise ValueError(f"an Adam state over {len(group['params'])} parameters does not "
                             f"fit {len(self.params)}")
        mine = self.param_groups[0]
        mine.update(lr=float(group["lr"]), eps=float(group["eps"]),
                    betas=(float(group["betas"][0]), float(group["betas"][1])))
        fused = bool(mine["fused"])
        old = dict(self.state)
        self.state.clear()  # the same dict: what a stack checks its members by stays theirs
        for i, s in state["state"].items():
            p = self.params[int(i)]
            kept = old.get(p)
            if kept and kept["exp_avg"].shape == s["exp_avg"].shape:
                with torch.no_grad():
                    kept["step"].fill_(float(s["step"]))
                    kept["exp_avg"].copy_(s["exp_avg"])
                    kept["exp_avg_sq"].copy_(s["exp_avg_sq"])
                self.state[p] = kept
                continue
            self.state[p] = {
                "step": _step_tensor(float(s["step"]), p, fused),
                "exp_avg": s["exp_avg"].to(p.device, p.dtype, copy=True),
                "exp_avg_sq": s["exp_avg_sq"].to(p.device, p.dtype, copy=True)}


def adam_settings(opt: Adam) -> list[dict[str, Any]]:
    """``opt``'s settings that members of one stack must share (their learning rates may
    differ: a stack steps each member at its own rate), per parameter group."""
    return [{k: group[k] for k in ("betas", "eps", "weight_decay", "amsgrad")}
            for group in opt.param_groups]


def _step_tensor(value: float, p: torch.Tensor, fused: bool) -> torch.Tensor:
    """A step count as ``torch.optim.Adam`` keeps it: float32 on the parameter's device for
    the fused kernel, a CPU tensor of the default dtype otherwise."""
    if fused:
        return torch.tensor(value, dtype=torch.float32, device=p.device)
    return torch.tensor(value, dtype=torch.get_default_dtype())
