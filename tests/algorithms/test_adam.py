"""distmarl's Adam: torch's Adam arithmetic and state layout, without torch.optim's objects
(whose creation imports torch._dynamo in every process)."""

from __future__ import annotations

import json
import subprocess
import sys

import torch

from distmarl.algorithms.common.adam import Adam


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _train(net: torch.nn.Module, opt, steps: int, seed: int = 1) -> None:
    gen = torch.Generator().manual_seed(seed)
    for i in range(steps):
        opt.zero_grad()
        net(torch.randn(16, 4, generator=gen)).pow(2).mean().backward()
        if i == 2:
            opt.param_groups[0]["lr"] = 3e-3  # a rate changed mid-run
        opt.step()


def test_steps_and_state_match_torchs_adam() -> None:
    a, b = _net(0), _net(0)
    ours = Adam(a.parameters(), lr=1e-2, betas=(0.8, 0.99), eps=1e-6)
    theirs = torch.optim.Adam(b.parameters(), lr=1e-2, betas=(0.8, 0.99), eps=1e-6, fused=True)
    _train(a, ours, 5)
    _train(b, theirs, 5)
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
    _train(b, theirs, 3)
    a.load_state_dict(b.state_dict())
    ours = Adam(a.parameters(), lr=0.5)
    ours.load_state_dict(theirs.state_dict())  # a checkpoint written with torch.optim.Adam
    assert ours.param_groups[0]["lr"] == 3e-3
    _train(a, ours, 2, seed=7)
    _train(b, theirs, 2, seed=7)
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
