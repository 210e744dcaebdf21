"""IPPO / MAPPO state: exact round trips, weights for workers, clones, mutations that keep
weights."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from distmarl.algorithms import IPPO, MADDPG, MAPPO
from tests.algorithms.ppo_helpers import AGENTS, fragment, make, observations, params


def through_torch_save(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def trained(algo: str, actions: str = "mixed"):
    agent = make(algo, actions, seed=1, batch_size=16)
    batch = fragment(agent, t=6, e=2, seed=2)
    agent.learn(batch)
    return agent, batch


def same_acting(x, y, explore: bool = True) -> bool:
    obs = observations(5, seed=7)
    (ax, ex), (ay, ey) = x.act_with_info(obs, explore), y.act_with_info(obs, explore)
    return all(np.array_equal(ax[a], ay[a]) and np.array_equal(ex["log_prob"][a], ey["log_prob"][a])
               and np.array_equal(ex["value"][a], ey["value"][a]) for a in AGENTS)


def test_flags_and_names() -> None:
    assert all(cls.rollout_spec(None, None).on_policy for cls in (IPPO, MAPPO))
    assert not MADDPG.rollout_spec(None, None).on_policy
    assert (IPPO.name, MAPPO.name) == ("IPPO", "MAPPO")
    assert make("IPPO").reset_noise(np.ones(3, dtype=bool)) is None


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
def test_state_round_trip_reproduces_actions_and_learning_exactly(algo: str) -> None:
    agent, batch = trained(algo)
    agent.mutate_architecture("add_layer", np.random.default_rng(0))  # the loader must rebuild
    state = through_torch_save(agent.state_dict())
    other = make(algo, "mixed", seed=99)
    other.load_state_dict(state)
    assert other.hp == agent.hp and other.learn_steps == agent.learn_steps == 1
    for _ in range(3):  # exploring: the sampling RNG is restored as well
        assert same_acting(agent, other)
    assert other.learn(batch) == agent.learn(batch)
    p1, p2 = params(agent), params(other)
    assert all(torch.equal(p1[k], p2[k]) for k in p1)


def test_state_holds_plain_data_and_target_kl_none() -> None:
    agent, _ = trained("IPPO")
    state = through_torch_save(agent.state_dict())
    assert state["hp"]["target_kl"] is None and state["algorithm"] == "IPPO"
    with pytest.raises(ValueError, match="does not fit MAPPO"):
        make("MAPPO").load_state_dict(state)


def test_weights_let_a_worker_act_and_record_like_the_learner() -> None:
    learner, _ = trained("MAPPO")
    learner.mutate_architecture("add_node", np.random.default_rng(1))
    worker = make("MAPPO", "mixed", seed=5)
    weights = learner.get_weights()
    assert all(isinstance(v, np.ndarray) for v in weights["params"].values())
    assert any(k.startswith("value/") for k in weights["params"])  # values are recorded too
    worker.set_weights(weights)
    assert same_acting(learner, worker, explore=False)
    # weights are copies: learning afterwards does not change the worker
    before = params(worker)
    learner.learn(fragment(learner, t=4, e=2))
    assert all(torch.equal(before[k], v) for k, v in params(worker).items())


def test_clone_is_equal_and_independent() -> None:
    agent, batch = trained("IPPO", "box")
    twin = agent.clone()
    assert same_acting(agent, twin, explore=False)
    before = params(agent)
    twin.learn(batch)
    assert all(torch.equal(before[k], v) for k, v in params(agent).items())


def outputs(agent) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = {}
    with torch.no_grad():
        for name, net in agent.nets.online.items():
            out[name] = net(torch.randn(8, net.arch.encoder.in_dim, generator=g))
    return out


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
@pytest.mark.parametrize("kind", ["add_node", "add_layer"])
def test_growing_mutations_keep_outputs_log_std_and_learning(algo: str, kind: str) -> None:
    agent, batch = trained(algo)
    before, log_std = outputs(agent), agent.log_std["agent"].detach().clone()
    info = agent.mutate_architecture(kind, np.random.default_rng(3))
    assert set(info["networks"]) == set(agent.nets.online)
    after = outputs(agent)
    assert all(torch.allclose(before[n], after[n], atol=1e-6) for n in before)
    assert torch.equal(agent.log_std["agent"], log_std)
    metrics = agent.learn(batch)  # optimisers follow the new parameters
    assert all(np.isfinite(v) for v in metrics.values())
    assert not torch.equal(agent.log_std["agent"], log_std)


def test_shrinking_and_activation_mutations_keep_the_overlap() -> None:
    agent, _ = trained("IPPO")
    w = agent.policy_net("agent").head.linears[0].weight.detach().clone()
    agent.mutate_architecture("remove_node", np.random.default_rng(0))
    agent.mutate_activation(np.random.default_rng(0), ["ELU", "GELU"])
    new = agent.policy_net("agent").head.linears[0].weight
    rows, cols = min(w.shape[0], new.shape[0]), min(w.shape[1], new.shape[1])
    assert torch.equal(new[:rows, :cols], w[:rows, :cols])
    assert agent.policy_net("agent").activation in ("ELU", "GELU")


def test_parameter_mutation_perturbs_policies_only() -> None:
    agent, _ = trained("MAPPO")
    before = params(agent)
    info = agent.mutate_parameters(0.1, np.random.default_rng(0))
    assert set(info["networks"]) == {"policy/agent", "policy/speaker"}
    after = params(agent)
    changed = {k.rsplit("/", 1)[0] for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("policy/") for k in changed)
