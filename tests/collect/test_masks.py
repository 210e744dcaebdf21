"""No algorithm ever sends a masked action to the env: masks in infos or in dict observations,
while collecting (exploring), evaluating (greedy) and playing at random; MADDPG / MATD3 learn
from masked transitions and their target actors bootstrap only from legal actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import ALGORITHMS
from distmarl.algorithms.common.space_tensors import DiscreteCodec
from distmarl.collect import Collector, RandomPolicy, Seats, episode_returns, evaluate
from distmarl.envs import VectorParallelEnv
from tests.algorithms.ppo_helpers import NET, MaskedInfoEnv


class MaskedDictEnv(MaskedInfoEnv):
    """:class:`MaskedInfoEnv` with its masks in the observation (PettingZoo's classic games'
    convention) instead of the infos; an illegal action raises."""

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Dict({"observation": spaces.Box(-10.0, 10.0, (2,), np.float32),
                            "action_mask": spaces.Box(0, 1, (4,), np.int8)})

    def _observe(self) -> tuple[dict, dict]:
        obs, infos = super()._observe()
        return ({a: {"observation": o, "action_mask": infos[a]["action_mask"]}
                 for a, o in obs.items()}, {a: {} for a in obs})


def spaces_of(venv: Any) -> tuple[dict, dict]:
    return ({a: venv.single_observation_space(a) for a in venv.possible_agents},
            {a: venv.single_action_space(a) for a in venv.possible_agents})


@pytest.mark.parametrize("env", [MaskedInfoEnv, MaskedDictEnv])
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_no_masked_action_reaches_the_env(name: str, env: type) -> None:
    with VectorParallelEnv([env] * 3, mode="sync", seed=0) as venv:
        algo = ALGORITHMS[name](*spaces_of(venv), NET, seed=2)
        rollout = Collector(venv, algo, seed=0).collect(40)  # 20 episodes; illegal would raise
        assert len(rollout.episode_scores) == 18
        assert evaluate(venv, algo, episodes=2, seed=1) == [6.0 * 2] * 6
        assert evaluate(venv, RandomPolicy(spaces_of(venv)[1], seed=0), episodes=2,
                        seed=1) == [12.0] * 6
    if not algo.spec.on_policy:  # the stored next observation carries the next step's mask
        nxt = rollout.data["next_obs"]["bob_0"]
        assert set(nxt) == {"observation", "action_mask"}
        metrics = algo.learn({f: {a: v[:32] if not isinstance(v, dict) else
                                  {k: x[:32] for k, x in v.items()} for a, v in per.items()}
                              for f, per in rollout.data.items()})
        assert np.isfinite(list(metrics.values())).all()


def test_a_mask_given_to_act_wins_and_a_box_agent_refuses_one() -> None:
    algo = ALGORITHMS["MADDPG"]({"a_0": spaces.Box(-1, 1, (3,), np.float32)},
                                {"a_0": spaces.Discrete(5)}, NET, seed=0)
    obs = {"a_0": np.zeros((64, 3), np.float32)}
    only_3 = np.tile(np.eye(5, dtype=np.int8)[3], (64, 1))
    assert (algo.act(obs, explore=True, action_mask={"a_0": only_3})["a_0"] == 3).all()
    assert (algo.act(obs, explore=False, action_mask={"a_0": only_3})["a_0"] == 3).all()
    boxed = ALGORITHMS["MADDPG"]({"a_0": spaces.Box(-1, 1, (3,), np.float32)},
                                 {"a_0": spaces.Box(-1, 1, (2,), np.float32)}, NET, seed=0)
    with pytest.raises(ValueError, match="masks apply to Discrete actions only"):
        boxed.act(obs, action_mask={"a_0": np.ones((64, 2), np.int8)})


def test_gumbel_draws_never_pick_a_masked_action() -> None:
    codec = DiscreteCodec(spaces.Discrete(6), torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    out = torch.randn(10_000, 6, generator=gen) * 5
    mask = torch.rand(10_000, 6, generator=gen) < 0.4
    mask[:, 0] |= ~mask.any(dim=1)  # at least one legal action per row
    for draw in (lambda: torch.as_tensor(codec.act(out, True, None, gen, mask)),
                 lambda: codec.target(out, gen, mask).argmax(dim=1),
                 lambda: codec.policy(out, gen, mask).argmax(dim=1)):
        picked = draw()
        assert mask[torch.arange(10_000), picked].all()
    soft = codec.policy(out.requires_grad_(True), gen, mask)
    soft.sum().backward()
    assert torch.isfinite(out.grad).all()


class Spy:
    """A policy that records which agents it was asked to act for."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.asked = inner, set()

    def act(self, obs: dict, explore: bool = False, action_mask: Any = None) -> dict:
        self.asked |= set(obs)
        return self.inner.act(obs, explore=explore)


def test_seats_give_each_policy_its_own_agents_and_returns_stay_per_agent() -> None:
    with VectorParallelEnv([MaskedDictEnv] * 2, mode="sync", seed=0) as venv:
        algo = ALGORITHMS["IPPO"](*spaces_of(venv), NET, seed=0)
        first, second = Spy(algo), Spy(RandomPolicy(spaces_of(venv)[1], seed=3))
        returns = episode_returns(venv, Seats({"bob_0": first, "bob_1": second}), 2, seed=5)
    assert (first.asked, second.asked) == ({"bob_0"}, {"bob_1"})
    assert returns == [{"bob_0": 6.0, "bob_1": 6.0}] * 4
