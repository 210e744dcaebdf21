"""MADDPG / MATD3 on image and dict observations: CNN actors, critics that encode every agent's
image, uint8 reaching the network, learning, mutation and a state round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import MADDPG, MATD3
from distmarl.networks import NetConfigError
from distmarl.networks.cnn import EvolvableCNN
from distmarl.networks.multi_input import MultiInputEncoder

FRAME = spaces.Box(0, 255, (12, 12, 2), np.uint8)
OBS = {"cam_0": FRAME,
       "rover_0": spaces.Dict({"camera": FRAME, "speed": spaces.Box(-1, 1, (3,), np.float32)})}
ACT = {"cam_0": spaces.Discrete(4), "rover_0": spaces.Box(-1, 1, (2,), np.float32)}
NET = {"latent_dim": 16,
       "encoder_config": {"channel_size": [8], "kernel_size": [3], "stride_size": [2]},
       "head_config": {"hidden_size": [16]}}


def observations(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    frame = lambda: rng.integers(0, 256, (n, 12, 12, 2), dtype=np.uint8)  # noqa: E731
    return {"cam_0": frame(),
            "rover_0": {"camera": frame(), "speed": rng.uniform(-1, 1, (n, 3)).astype(np.float32)}}


def batch(n: int = 32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": observations(n, seed), "next_obs": observations(n, seed + 1),
            "action": {"cam_0": rng.integers(0, 4, (n, 1)),
                       "rover_0": rng.uniform(-1, 1, (n, 2)).astype(np.float32)},
            "reward": {a: rng.standard_normal((n, 1)).astype(np.float32) for a in OBS},
            "terminated": {a: np.zeros((n, 1), np.float32) for a in OBS},
            "truncated": {a: np.zeros((n, 1), np.float32) for a in OBS},
            "active": {a: np.ones((n, 1), np.float32) for a in OBS}}


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_image_agents_act_and_learn_with_cnn_actors_and_critics(cls) -> None:
    agent = cls(OBS, ACT, NET, seed=0)
    assert isinstance(agent.actor("cam_0").encoder, EvolvableCNN)
    assert isinstance(agent.actor("rover_0").encoder, MultiInputEncoder)
    critic = agent.nets.online["critic/cam_0"].encoder
    assert isinstance(critic, MultiInputEncoder)
    assert [k for k, _ in critic.spec.parts] == ["cam_0", "rover_0/camera", "rover_0/speed"]
    seen: list[torch.dtype] = []
    agent.actor("cam_0").encoder.register_forward_pre_hook(lambda m, args: seen.append(args[0].dtype))
    actions = agent.act(observations(5))
    assert actions["cam_0"].shape == (5,) and actions["rover_0"].shape == (5, 2)
    assert seen == [torch.uint8]  # frames reach the CNN as stored
    b = batch()
    first = agent.learn(b)
    for _ in range(20):
        last = agent.learn(b)
    assert np.isfinite(list(last.values())).all()
    assert last["loss/critic/cam_0"] < first["loss/critic/cam_0"]


def test_image_networks_mutate_and_survive_a_state_round_trip() -> None:
    agent = MADDPG(OBS, ACT, NET, seed=1)
    rng = np.random.default_rng(0)
    for kind in ("add_layer", "add_node", "remove_node", "add_layer"):
        agent.mutate_architecture(kind, rng)
    x = observations(4, seed=3)
    copy = MADDPG(OBS, ACT, NET, seed=2)
    copy.load_state_dict(agent.state_dict())
    assert copy.nets.arch() == agent.nets.arch()
    for a in OBS:
        xa = copy.readers[a].tensor(x[a], copy.device)
        torch.testing.assert_close(copy.actor(a)(xa), agent.actor(a)(xa))
    agent.learn(batch())


def test_an_mlp_config_for_an_image_agent_says_what_to_set() -> None:
    mlp = {"encoder_config": {"hidden_size": [64]}}
    with pytest.raises(NetConfigError, match=r"agent 'cam_0' observes an image \(12, 12, 2\).*"
                       r"set a CNN config.*channel_size"):
        MADDPG(OBS, ACT, mlp, seed=0)
