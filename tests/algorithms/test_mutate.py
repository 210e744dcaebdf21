"""HPO hooks: architecture, activation and parameter mutations across every network."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from distmarl.algorithms.common.mutate import ARCH_KINDS
from tests.algorithms.helpers import ACTION_SETS, AGENTS, batch, make, observations, params


def outputs(agent) -> dict[str, torch.Tensor]:
    """Every online and target network's output on fixed inputs."""
    g = torch.Generator().manual_seed(0)
    out = {}
    for which in ("online", "target"):
        for name, net in getattr(agent.nets, which).items():
            x = torch.randn(8, net.arch.encoder.in_dim, generator=g)
            extra = torch.randn(8, net.extra_dim, generator=g) if net.extra_dim else None
            with torch.no_grad():
                out[f"{which}:{name}"] = net(x, extra)
    return out


def trained(algo: str = "MATD3", actions: str = "mixed", steps: int = 3):
    agent = make(algo, actions, seed=1)
    b = batch(ACTION_SETS[actions], seed=2)
    for _ in range(steps):
        agent.learn(b)
    return agent, b


def overlap_equal(old: torch.Tensor, new: torch.Tensor) -> bool:
    idx = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new.shape))
    return torch.equal(old[idx], new[idx])


@pytest.mark.parametrize("kind", ARCH_KINDS)
def test_every_kind_keeps_overlapping_weights_of_networks_and_targets(kind: str) -> None:
    agent, b = trained()
    before = {w: params(agent, w) for w in ("online", "target")}
    desc = agent.mutate_architecture(kind, np.random.default_rng(4), preserve_output=True)
    json.dumps(desc)
    assert set(desc["networks"]) == set(agent.nets.online) and len(desc["networks"]) == 6
    part = desc["part"]
    for which in ("online", "target"):
        after = params(agent, which)
        for key, old in before[which].items():
            new_key = key  # parts are one layer deep: only add_layer moves the output layer
            if kind == "add_layer" and f"{part}.linears.1." in key:
                new_key = key.replace(f"{part}.linears.1.", f"{part}.linears.2.")
            assert overlap_equal(old, after[new_key]), (which, key)
    actor = desc["networks"]["actor/speaker_0"]
    expected_op = {"add_layer": "add_layer", "remove_layer": "remove_nodes",
                   "add_node": "add_nodes", "remove_node": "remove_nodes"}[kind]
    assert actor["op"] == expected_op and actor["part"] == part
    assert all(d["hidden_size"] == actor["hidden_size"] for d in desc["networks"].values())
    agent.learn(b)  # still trains, optimisers rebuilt over the new parameters
    assert all(len(o.param_groups[0]["params"]) == len(list(agent.nets.online[n].parameters()))
               for n, o in agent.nets.optim.items())


@pytest.mark.parametrize("kind", ["add_layer", "add_node"])
def test_growth_preserves_every_output_and_targets_stay_distinct(kind: str) -> None:
    agent, _ = trained()
    before = outputs(agent)
    desc = agent.mutate_architecture(kind, np.random.default_rng(5), preserve_output=True)
    assert all(d["output_preserved"] for d in desc["networks"].values())
    after = outputs(agent)
    for k in before:  # equal up to float summation order (a wider matmul may sum differently)
        torch.testing.assert_close(after[k], before[k], rtol=1e-6, atol=1e-6)
    assert not torch.equal(after["online:critic/speaker_0"], after["target:critic/speaker_0"])
    obs = observations(4)
    greedy = agent.act(obs, explore=False)
    assert all(np.array_equal(greedy[a], agent.act(obs, explore=False)[a]) for a in AGENTS)


def test_growth_without_preservation_changes_outputs_but_online_and_target_new_parts_match() -> None:
    agent, _ = trained("MADDPG", "box")
    before = outputs(agent)
    desc = agent.mutate_architecture("add_node", np.random.default_rng(6), preserve_output=False)
    after = outputs(agent)
    assert not torch.equal(before["online:actor/speaker_0"], after["online:actor/speaker_0"])
    part, layer = desc["part"], desc["networks"]["actor/speaker_0"]["layer"]
    old_width = desc["networks"]["actor/speaker_0"]["hidden_size_before"][layer]
    on = agent.nets.online["actor/speaker_0"].part(part).linears[layer].weight[old_width:]
    tg = agent.nets.target["actor/speaker_0"].part(part).linears[layer].weight[old_width:]
    assert on.shape[0] == desc["num_nodes"] and torch.equal(on, tg)


def test_same_generator_same_mutation() -> None:
    descs, weights = [], []
    for _ in range(2):
        agent, _ = trained()
        rng = np.random.default_rng(11)
        descs.append([agent.mutate_architecture(k, rng, preserve_output=False) for k in ARCH_KINDS])
        weights.append(params(agent))
    assert descs[0] == descs[1]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_adam_state_follows_the_kept_weights() -> None:
    agent, _ = trained("MADDPG", "box")
    opt = agent.nets.optim["critic/speaker_0"]
    net = agent.nets.online["critic/speaker_0"]
    old = {n: dict(opt.state[p]) for n, p in net.named_parameters()}
    desc = agent.mutate_architecture("add_node", np.random.default_rng(1))
    part, layer = desc["part"], desc["networks"]["critic/speaker_0"]["layer"]
    new_net, new_opt = agent.nets.online["critic/speaker_0"], agent.nets.optim["critic/speaker_0"]
    name = f"{part}.linears.{layer}.weight"
    p = dict(new_net.named_parameters())[name]
    state, was = new_opt.state[p], old[name]
    rows = was["exp_avg"].shape[0]
    assert torch.equal(state["exp_avg"][:rows], was["exp_avg"])
    assert torch.count_nonzero(state["exp_avg"][rows:]) == 0
    assert torch.equal(state["exp_avg_sq"][:rows], was["exp_avg_sq"])
    torch.testing.assert_close(state["exp_avg_sq"][rows:],
                               torch.full_like(state["exp_avg_sq"][rows:], float(was["exp_avg_sq"].mean())))
    assert float(state["step"]) == float(was["step"]) == 3.0


def test_bounds_fall_back_or_leave_networks_alone() -> None:
    agent = make("MADDPG", "box")
    rng = np.random.default_rng(0)
    for _ in range(2):
        agent.mutate_architecture("add_layer", rng)
    depths = {n: (net.arch.encoder.depth, net.arch.head.depth) for n, net in agent.nets.online.items()}
    assert max(max(d) for d in depths.values()) <= 3
    for _ in range(12):
        desc = agent.mutate_architecture("remove_node", rng)
    assert desc["networks"]["actor/speaker_0"]["op"] is None
    assert "at its bounds" in desc["networks"]["actor/speaker_0"]["reason"]
    with pytest.raises(ValueError, match="unknown architecture mutation 'grow'"):
        agent.mutate_architecture("grow", rng)


def test_activation_mutation_switches_every_network_and_keeps_weights() -> None:
    agent, _ = trained()
    before = {w: params(agent, w) for w in ("online", "target")}
    desc = agent.mutate_activation(np.random.default_rng(2))
    assert desc["activation_before"] == "ReLU" and desc["activation"] in ("ELU", "GELU")
    assert all(net.activation == desc["activation"] for net in agent.nets.online.values())
    assert all(net.activation == desc["activation"] for net in agent.nets.target.values())
    for w in ("online", "target"):
        assert all(torch.equal(before[w][k], v) for k, v in params(agent, w).items())
    desc = agent.mutate_activation(np.random.default_rng(2), choices=["ReLU", "Tanh"])
    assert desc["activation"] in ("ReLU", "Tanh") and desc["activation"] != desc["activation_before"]
    with pytest.raises(ValueError, match="no activation other than"):
        agent.mutate_activation(np.random.default_rng(2), choices=[desc["activation"]])


def test_parameter_mutation_touches_only_actor_weight_matrices() -> None:
    agent, _ = trained()
    before, targets = params(agent), params(agent, "target")
    desc = agent.mutate_parameters(0.1, np.random.default_rng(3))
    json.dumps(desc)
    after = params(agent)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("actor/") and k.endswith("weight") for k in changed)
    for name, tensors in desc["networks"].items():
        for tensor, count in tensors.items():
            key = f"{name}/{tensor}"
            assert 0 < int((before[key] != after[key]).sum()) <= count
    assert all(torch.equal(targets[k], v) for k, v in params(agent, "target").items())
    again, _ = trained()
    assert again.mutate_parameters(0.1, np.random.default_rng(3)) == desc
