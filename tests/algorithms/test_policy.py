"""Policies: algorithms built with ``learner=False`` hold what acting needs and nothing more,
act as their learner does once they have its weights or its state, and refuse to learn."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from distmarl.algorithms import IPPO, MADDPG, MAPPO, MATD3
from tests.algorithms import helpers
from tests.algorithms import ppo_helpers as ph

CASES = [(MADDPG, "off"), (MATD3, "off"), (IPPO, "on"), (MAPPO, "on")]


def build(cls: Any, family: str, learner: bool, seed: int) -> Any:
    if family == "off":
        return cls(helpers.OBS, helpers.MIXED_ACT, helpers.NET, seed=seed, learner=learner)
    return cls(ph.OBS, ph.MIXED_ACT, ph.NET, seed=seed, learner=learner)


def observations(family: str, seed: int) -> dict[str, np.ndarray]:
    return (helpers.observations if family == "off" else ph.observations)(5, seed)


def act(algo: Any, family: str, seed: int) -> dict[str, Any]:
    """Greedy actions and (on-policy) values and greedy log-probabilities."""
    obs = observations(family, seed)
    if family == "off":
        return algo.act(obs, explore=False)
    actions, info = algo.act_with_info(obs, explore=False)
    return {"actions": actions, **info}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


@pytest.mark.parametrize("cls,family", CASES)
def test_a_policy_holds_no_critic_target_or_optimiser(cls: Any, family: str) -> None:
    policy, learner = build(cls, family, False, 0), build(cls, family, True, 0)
    assert not policy.nets.target and not policy.nets.optim
    if family == "off":
        assert sorted(policy.nets.online) == sorted(learner.nets.names("actor"))
    else:  # acting records each value: the value networks stay, PPO's log-std optimisers go
        assert sorted(policy.nets.online) == sorted(learner.nets.online)
        assert learner.log_std_optim and not policy.log_std_optim


@pytest.mark.parametrize("cls,family", CASES)
def test_a_policy_acts_as_its_learner_from_its_weights_or_state(cls: Any, family: str) -> None:
    learner = build(cls, family, True, 0)
    learner.mutate_architecture("add_node", np.random.default_rng(3))  # the policy rebuilds
    with torch.no_grad():
        for net in learner.nets.online.values():
            for p in net.parameters():
                p.add_(0.1 * torch.randn_like(p))
    from_weights, from_state = build(cls, family, False, 1), build(cls, family, False, 2)
    from_weights.set_weights(learner.get_weights())
    from_state.load_state_dict(learner.state_dict())
    for seed in range(3):
        want = act(learner, family, seed)
        assert same(act(from_weights, family, seed), want)
        assert same(act(from_state, family, seed), want)


@pytest.mark.parametrize("cls,family", CASES)
def test_a_policy_refuses_to_learn_save_or_copy(cls: Any, family: str) -> None:
    policy = build(cls, family, False, 0)
    learn = ((lambda: policy.learn_batches([helpers.batch(helpers.MIXED_ACT, 8)]))
             if family == "off" else (lambda: policy.learn(ph.fragment(policy, t=2, e=2))))
    for call in (learn, policy.state_dict, policy.clone):
        with pytest.raises(RuntimeError, match=f"this {cls.name} is a policy, built for acting"):
            call()
