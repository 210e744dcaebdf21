"""state_dict / get_weights / clone / hyperparameters: exact round trips, plain data, no sharing."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from tests.algorithms.helpers import ACTION_SETS, AGENTS, batch, make, observations, params


def through_torch_save(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def trained(algo: str, actions: str):
    agent = make(algo, actions, seed=1)
    b = batch(ACTION_SETS[actions], seed=2)
    for _ in range(3):
        agent.learn(b)
    agent.act(observations(4))  # noise processes exist and have state
    return agent, b


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
@pytest.mark.parametrize("actions", ["box", "mixed"])
def test_state_round_trip_reproduces_actions_and_learning_exactly(algo: str, actions: str) -> None:
    agent, b = trained(algo, actions)
    agent.mutate_architecture("add_layer", np.random.default_rng(0))  # a rebuild is needed too
    state = through_torch_save(agent.state_dict())
    other = make(algo, actions, seed=99)
    other.load_state_dict(state)
    assert other.hp == agent.hp and other.learn_steps == agent.learn_steps == 3
    for _ in range(3):  # exploring: noise state and RNG restored as well
        obs = observations(4, seed=5)
        got, want = other.act(obs), agent.act(obs)
        assert all(np.array_equal(got[a], want[a]) for a in AGENTS)
    assert other.learn(b) == agent.learn(b)
    p1, p2 = params(agent), params(other)
    assert all(torch.equal(p1[k], p2[k]) for k in p1)


def test_state_is_a_snapshot_and_load_does_not_share_optimiser_tensors() -> None:
    agent, b = trained("MADDPG", "box")
    state = agent.state_dict()
    frozen = {k: v.clone() for k, v in state["networks"]["online"]["actor/speaker_0"].items()}
    agent.learn(b)
    assert all(torch.equal(frozen[k], v)
               for k, v in state["networks"]["online"]["actor/speaker_0"].items())
    x, y = make("MADDPG", "box"), make("MADDPG", "box")
    x.load_state_dict(state)
    y.load_state_dict(state)
    x.learn(b)
    sx = x.nets.optim["critic/speaker_0"].state_dict()["state"][0]["exp_avg"]
    sy = y.nets.optim["critic/speaker_0"].state_dict()["state"][0]["exp_avg"]
    assert not torch.equal(sx, sy)


def test_load_refuses_another_algorithm_or_agents() -> None:
    with pytest.raises(ValueError, match="does not fit MATD3"):
        make("MATD3").load_state_dict(make("MADDPG").state_dict())


def test_clone_is_equal_and_independent() -> None:
    agent, b = trained("MATD3", "mixed")
    twin = agent.clone()
    obs = observations(3)
    assert all(np.array_equal(twin.act(obs, False)[a], agent.act(obs, False)[a]) for a in AGENTS)
    before = params(agent)
    twin.learn(b)
    assert all(torch.equal(before[k], v) for k, v in params(agent).items())
    assert twin.device == agent.device == torch.device("cpu")


def test_weights_are_plain_numpy_copies_that_reproduce_greedy_actions() -> None:
    agent, _ = trained("MADDPG", "mixed")
    agent.mutate_architecture("add_node", np.random.default_rng(3))
    weights = agent.get_weights()
    assert set(weights) == {"arch", "params", "hp", "algorithm"}
    assert all(isinstance(v, np.ndarray) for v in weights["params"].values())
    assert all(k.startswith("actor/") for k in weights["params"])
    json.dumps(weights["arch"]), json.dumps(weights["hp"])
    worker = make("MADDPG", "mixed", seed=7)  # the initial, smaller architecture
    worker.set_weights(weights)
    obs = observations(6)
    assert all(np.array_equal(worker.act(obs, False)[a], agent.act(obs, False)[a]) for a in AGENTS)
    next(iter(weights["params"].values()))[...] = 123.0  # a copy: the learner is untouched
    assert all(np.array_equal(worker.act(obs, False)[a], agent.act(obs, False)[a]) for a in AGENTS)


def test_set_weights_carries_exploration_settings() -> None:
    agent = make("MADDPG", "box")
    agent.set_hyperparameter("expl_noise", 0.3)
    worker = make("MADDPG", "box")
    worker.set_weights(agent.get_weights())
    assert worker.hp["expl_noise"] == 0.3


def test_learning_rate_changes_in_place_and_adam_moments_are_kept() -> None:
    agent, _ = trained("MADDPG", "box")
    opt = agent.nets.optim["actor/listener_0"]
    moments = {k: v.clone() for k, v in opt.state_dict()["state"][0].items()}
    agent.set_hyperparameter("lr_actor", 5e-4)
    assert agent.hp["lr_actor"] == 5e-4
    assert all(g["lr"] == 5e-4 for n in agent.nets.names("actor")
               for g in agent.nets.optim[n].param_groups)
    assert all(g["lr"] == 1e-2 for g in agent.nets.optim["critic/speaker_0"].param_groups)
    assert opt is agent.nets.optim["actor/listener_0"]
    assert all(torch.equal(moments[k], v) for k, v in opt.state_dict()["state"][0].items())
    agent.set_hyperparameter("lr_critic", 2e-3)
    assert agent.nets.optim["critic/listener_0"].param_groups[0]["lr"] == 2e-3


def test_hyperparameters_are_checked() -> None:
    agent = make("MATD3")
    agent.set_hyperparameter("batch_size", 128.0)
    assert agent.hp["batch_size"] == 128 and isinstance(agent.hp["batch_size"], int)
    with pytest.raises(ValueError, match="MADDPG has no hyperparameter 'policy_freq'"):
        make("MADDPG").set_hyperparameter("policy_freq", 2)
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 64\.5"):
        agent.set_hyperparameter("batch_size", 64.5)
    with pytest.raises(ValueError, match="gamma must be within"):
        agent.set_hyperparameter("gamma", 1.5)
    with pytest.raises(ValueError, match="lr_actor must be > 0"):
        make("MADDPG", lr_actor=0.0)
    assert sorted(make("MADDPG").hp) == sorted([
        "batch_size", "lr_actor", "lr_critic", "learn_step", "gamma", "tau", "expl_noise",
        "O_U_noise", "mean_noise", "theta", "dt", "max_grad_norm", "actor_reg", "replay_ratio",
        "prioritized_replay_alpha", "prioritized_replay_beta"])
    assert {"policy_freq", "policy_noise", "noise_clip"} <= set(agent.hp)


def test_reseed_separates_a_copy_from_its_source() -> None:
    agent, _ = trained("MADDPG", "mixed")
    twin = agent.clone()
    twin.reseed(123)
    obs = observations(16)
    a, b = agent.act(obs), twin.act(obs)
    assert not np.array_equal(a["speaker_0"], b["speaker_0"])
    assert all(np.array_equal(agent.act(obs, False)[k], twin.act(obs, False)[k]) for k in AGENTS)
