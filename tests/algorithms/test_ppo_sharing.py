"""Parameter sharing: one policy and one value network per agent group, trained by all of its
agents; net_config per group."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import IPPO, MAPPO
from distmarl.algorithms.onpolicy.stack import OnPolicyStack
from distmarl.networks import NetConfigError
from tests.algorithms.ppo_helpers import (
    BOX_ACT,
    NET,
    OBS,
    fragment,
    make,
    observations,
    params,
)


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
def test_one_set_of_weights_per_group(algo: str) -> None:
    agent = make(algo, "mixed")
    assert sorted(agent.nets.online) == ["policy/agent", "policy/speaker", "value/agent",
                                         "value/speaker"]
    assert list(agent.log_std) == ["agent"]  # the speaker's actions are discrete
    assert agent.groups == {"agent": ["agent_0", "agent_1", "agent_2"], "speaker": ["speaker_0"]}
    # the group's agents act through the same network: equal observations, equal actions
    obs = observations(5)
    obs["agent_1"] = obs["agent_2"] = obs["agent_0"]
    out = agent.act(obs, explore=False)
    assert np.array_equal(out["agent_0"], out["agent_1"])
    assert np.array_equal(out["agent_0"], out["agent_2"])


def test_every_agent_of_a_group_trains_the_shared_networks() -> None:
    base = make("IPPO", "box", seed=1, update_epochs=1)
    batch = fragment(base, seed=2)
    before = params(base)
    moved = {}
    for k in range(3):  # only agent_k's rows active
        agent = base.clone()
        b = {f: dict(per) for f, per in batch.items()}
        for j in range(3):
            b["active"][f"agent_{j}"] = torch.full_like(batch["active"]["agent_0"], j == k)
        agent.learn(b)
        after = params(agent)
        moved[k] = {n: after[n] - before[n] for n in before}
        assert all(moved[k][n].abs().sum() > 0 for n in before
                   if n.startswith(("policy/agent/", "value/agent/", "log_std/agent")))
    # each agent's own data drives the shared weights (three different updates)
    name = "policy/agent/head.linears.1.weight"
    assert not torch.allclose(moved[0][name], moved[1][name])
    assert not torch.allclose(moved[1][name], moved[2][name])


def test_shared_gradient_is_the_mean_over_the_groups_agents(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One full-batch step: the shared value network's gradient with every agent active is the
    mean of the gradients from each agent's rows alone (each agent has as many rows). Value
    normalisation is off: its moments would differ between the four runs' rows."""
    agent = make("IPPO", "box", seed=4, batch_size=10_000, update_epochs=1, max_grad_norm=1e9,
                 value_norm=False)
    batch = fragment(agent, t=6, e=2, seed=5)
    captured: dict[str, list[torch.Tensor]] = {}
    original = OnPolicyStack._grads

    def grads_of(self: OnPolicyStack, g: str, *args: Any) -> Any:
        found, terms = original(self, g, *args)
        if g == "agent":  # the group's sets: policy, value, log-std
            captured["g"] = [x[0].clone() for x in found[1].values()]
        return found, terms

    monkeypatch.setattr(OnPolicyStack, "_grads", grads_of)
    grads = {}
    for k in (None, 0, 1, 2):
        a = agent.clone()
        b = {f: dict(per) for f, per in batch.items()}
        if k is not None:
            for j in range(3):
                b["active"][f"agent_{j}"] = torch.full_like(batch["active"]["agent_0"], j == k)
        a.learn(b)
        grads[k] = captured.pop("g")
    # value loss = 0.5 * mean over the active rows of all three agents (no clipping here)
    for p_all, p0, p1, p2 in zip(grads[None], grads[0], grads[1], grads[2]):
        assert torch.allclose(p_all, (p0 + p1 + p2) / 3, atol=1e-5)


def test_per_agent_net_config_in_a_group_is_an_error_that_says_so() -> None:
    cfg = {"agent_0": NET, "agent_1": NET, "agent_2": NET, "speaker": NET}
    with pytest.raises(NetConfigError, match=r"per group, not per agent.*'agent_0'.*'agent'"):
        IPPO(OBS, BOX_ACT, cfg)


def test_net_config_per_group_and_for_a_lone_agent() -> None:
    small = {"encoder_config": {"hidden_size": [16]}}
    agent = MAPPO(OBS, BOX_ACT, {"agent": NET, "speaker_0": small})
    assert agent.policy_net("agent").arch.encoder.hidden_size == (32,)
    assert agent.policy_net("speaker").arch.encoder.hidden_size == (16,)
    with pytest.raises(NetConfigError, match="configured twice"):
        IPPO(OBS, BOX_ACT, {"agent": NET, "speaker": NET, "speaker_0": NET})
    with pytest.raises(NetConfigError, match="no entry"):
        IPPO(OBS, BOX_ACT, {"agent": NET})


def test_agents_of_one_group_need_the_same_spaces() -> None:
    obs = {**OBS, "agent_2": spaces.Box(-1.0, 1.0, (7,), np.float32)}
    with pytest.raises(ValueError, match=r"'agent_2'.*differs.*cannot share"):
        IPPO(obs, BOX_ACT, NET)


def test_mappo_value_reads_the_agents_own_observation_first_then_the_others() -> None:
    agent = make("MAPPO", "box")
    joint = 3 * 6 + 3
    assert agent.value_net("agent").arch.encoder.in_dim == joint
    assert agent.value_net("speaker").arch.encoder.in_dim == joint
    assert make("IPPO", "box").value_net("agent").arch.encoder.in_dim == 6
    obs = {a: torch.full((2, agent.inputs[a].dim), float(i)) for i, a in enumerate(agent.agents)}
    inputs = dict(zip(agent.groups["agent"], agent._critic_inputs("agent", obs)))
    for a, x in inputs.items():
        others = [b for b in agent.agents if b != a]
        want = torch.cat([obs[a], *(obs[b] for b in others)], dim=-1)
        assert torch.equal(x, want)
    # the same layout for every agent of a group: swapping two agents' observations swaps
    # their value inputs exactly
    swapped = {**obs, "agent_0": obs["agent_1"], "agent_1": obs["agent_0"]}
    again = dict(zip(agent.groups["agent"], agent._critic_inputs("agent", swapped)))
    assert torch.equal(again["agent_0"], inputs["agent_1"])
    assert torch.equal(again["agent_1"], inputs["agent_0"])
    # different agents of the group see different inputs, so get different values
    _, extras = agent.act_with_info(observations(3))
    assert not np.allclose(extras["value"]["agent_0"], extras["value"]["agent_1"])
