"""distmarl's Adam: torch's Adam state layout without torch.optim's objects (whose creation
imports torch._dynamo in every process), stepped on a stack's rows by torch's arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
from torch.func import functional_call

from distmarl.algorithms.common.adam import Adam
from distmarl.algorithms.common.row_adam import RowAdam
from distmarl.algorithms.common.slots import Slots
from distmarl.algorithms.common.stacked_adam import StackedAdam


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _loss(net: torch.nn.Module, params: dict[str, torch.Tensor] | None,
          gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(16, 4, generator=gen)
    return (net(x) if params is None else functional_call(net, params, (x,))).pow(2).mean()


def _train_torch(net: torch.nn.Module, opt: torch.optim.Adam, steps: int, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    for i in range(steps):
        opt.zero_grad()
        _loss(net, None, gen).backward()
        if i == 2:
            opt.param_groups[0]["lr"] = 3e-3  # a rate changed mid-run
        opt.step()


def _train_rows(net: torch.nn.Module, opt: Adam, steps: int, seed: int = 1) -> None:
    """``steps`` steps of ``opt``'s network as a stack of one steps it: its parameters and
    state in a slot, :class:`RowAdam` on the slot's rows."""
    names = [n for n, _ in net.named_parameters()]

    def tensors(_: object) -> dict[tuple[str, str], torch.Tensor]:
        out = {}
        for n, p in net.named_parameters():
            state = opt.state_of(p)
            out["p", n], out["m", n] = p, state["exp_avg"]
            out["v", n], out["step", n] = state["exp_avg_sq"], state["step"]
        return out

    slots = Slots([net], tensors)
    by = {kind: {n: slots.stacked[kind, n] for n in names} for kind in ("p", "m", "v", "step")}
    group = opt.param_groups[0]
    adam = StackedAdam(by["m"], by["v"], by["step"], group["betas"], group["eps"])
    rows = RowAdam([by["p"]], [adam], [1], 1, fused=True)
    gen = torch.Generator().manual_seed(seed)
    for i in range(steps):
        leaves = {n: by["p"][n][0].detach().requires_grad_(True) for n in names}
        grads = torch.autograd.grad(_loss(net, leaves, gen), list(leaves.values()))
        lr = 3e-3 if i >= 2 else group["lr"]
        rows.step([0], [{n: g.unsqueeze(0) for n, g in zip(names, grads, strict=True)}], [[lr]])
    if steps > 2:
        group["lr"] = 3e-3  # as the torch side's rate changed mid-run


def test_row_steps_and_state_match_torchs_adam() -> None:
    a, b = _net(0), _net(0)
    ours = Adam(a.parameters(), lr=1e-2, betas=(0.8, 0.99), eps=1e-6)
    theirs = torch.optim.Adam(b.parameters(), lr=1e-2, betas=(0.8, 0.99), eps=1e-6, fused=True)
    _train_rows(a, ours, 5)
    _train_torch(b, theirs, 5)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-6, atol=1e-7)
    sa, sb = ours.state_dict(), theirs.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for k in sb["state"]:
        for key, value in sb["state"][k].items():
            assert sa["state"][k][key].dtype == value.dtype, key
            torch.testing.assert_close(sa["state"][k][key], value)


def test_states_load_both_ways_and_go_on_alike() -> None:
    a, b = _net(0), _net(0)
    theirs = torch.optim.Adam(b.parameters(), lr=1e-2)  # torch's default (foreach) form
    _train_torch(b, theirs, 3)
    a.load_state_dict(b.state_dict())
    ours = Adam(a.parameters(), lr=0.5)
    ours.load_state_dict(theirs.state_dict())  # a checkpoint written with torch.optim.Adam
    assert ours.param_groups[0]["lr"] == 3e-3
    _train_rows(a, ours, 2, seed=7)
    _train_torch(b, theirs, 2, seed=7)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    back = torch.optim.Adam(_net(3).parameters(), lr=1.0)
    back.load_state_dict(ours.state_dict())  # and back into torch's
    assert float(back.state_dict()["state"][0]["step"]) == 5.0


def test_a_state_over_other_parameters_is_refused() -> None:
    ours = Adam(_net(0).parameters(), lr=1e-2)
    other = Adam([torch.zeros(3, requires_grad=True)], lr=1e-2)
    try:
        ours.load_state_dict(other.state_dict())
    except ValueError as e:
        assert "1 parameters does not fit 4" in str(e)
    else:
        raise AssertionError("a state over 1 parameter loaded into 4")


def test_building_and_training_members_leaves_torch_dynamo_unimported() -> None:
    """Every learner, worker and evaluation process builds algorithms: none of them pays for
    torch._dynamo's import (seconds each), alone or stacked."""
    code = """
import json, sys, torch
from tests.algorithms import helpers, ppo_helpers
from distmarl.algorithms.groups import Stacks
m = [helpers.make("MADDPG", "discrete", seed=k) for k in range(2)]
b = helpers.batch(m[0].action_spaces, 8)
m[0].learn(b)
Stacks().replay(m, [[b], [b]])
p = [ppo_helpers.make("IPPO", seed=k) for k in range(2)]
fragment = ppo_helpers.fragment
Stacks().fragments(p, [fragment(p[0]), fragment(p[1])])
p[0].learn(fragment(p[0]))
print(json.dumps("torch._dynamo" in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False
