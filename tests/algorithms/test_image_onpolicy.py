"""IPPO / MAPPO on image and dict observations: CNN policies and value networks, frames reaching
the network as stored, masks from dict observations, learning on a fragment, mutation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import IPPO, MAPPO, ON_POLICY_FIELDS
from distmarl.networks.cnn import EvolvableCNN
from distmarl.networks.multi_input import MultiInputEncoder

FRAME = spaces.Box(0, 255, (10, 10, 2), np.uint8)
MASK = spaces.Box(0, 1, (3,), np.int8)
OBS = {f"piston_{i}": spaces.Dict({"observation": FRAME, "action_mask": MASK}) for i in range(2)}
OBS["rover_0"] = spaces.Dict({"camera": FRAME, "speed": spaces.Box(-1, 1, (2,), np.float32)})
ACT = {"piston_0": spaces.Discrete(3), "piston_1": spaces.Discrete(3),
       "rover_0": spaces.Box(-1, 1, (2,), np.float32)}
NET = {"latent_dim": 16,
       "encoder_config": {"channel_size": [8], "kernel_size": [3], "stride_size": [2]},
       "head_config": {"hidden_size": [16]}}


def observations(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    frame = lambda: rng.integers(0, 256, (n, 10, 10, 2), dtype=np.uint8)  # noqa: E731
    out: dict = {f"piston_{i}": {"observation": frame(),
                                 "action_mask": np.tile([1, 0, 1], (n, 1)).astype(np.int8)}
                 for i in range(2)}
    out["rover_0"] = {"camera": frame(), "speed": rng.uniform(-1, 1, (n, 2)).astype(np.float32)}
    return out


def stack(rows: list) -> object:
    if isinstance(rows[0], dict):
        return {k: stack([r[k] for r in rows]) for k in rows[0]}
    return np.stack(rows)


def fragment(algo, t: int = 6, e: int = 2) -> dict:
    obs = [observations(e, k) for k in range(t + 1)]
    out: dict = {f: {a: [] for a in OBS} for f in ON_POLICY_FIELDS}
    for k in range(t):
        actions, extras = algo.act_with_info(obs[k])
        next_value = algo.value_estimates(obs[k + 1])
        for a in OBS:
            row = (obs[k][a], actions[a], np.ones(e, np.float32), np.zeros(e, bool),
                   np.full(e, k == t - 1), np.ones(e, bool), extras["log_prob"][a],
                   extras["value"][a], next_value[a])
            for f, v in zip(ON_POLICY_FIELDS, row):
                out[f][a].append(v)
    return {f: {a: stack(v) for a, v in per.items()} for f, per in out.items()}


@pytest.mark.parametrize("cls", [IPPO, MAPPO])
def test_image_groups_act_within_masks_and_learn(cls) -> None:
    algo = cls(OBS, ACT, NET, hp={"batch_size": 4, "update_epochs": 2}, seed=0)
    assert isinstance(algo.policy_net("piston").encoder, EvolvableCNN)
    assert isinstance(algo.policy_net("rover").encoder, MultiInputEncoder)
    value = algo.value_net("piston").encoder
    if cls is MAPPO:  # own frame, then the others' inputs in env order
        assert [k for k, _ in value.spec.parts] == [
            "self", "other_0", "other_1/camera", "other_1/speed"]
    seen: list[torch.dtype] = []
    algo.policy_net("piston").encoder.register_forward_pre_hook(
        lambda m, args: seen.append(args[0].dtype))
    for seed in range(20):
        actions = algo.act(observations(4, seed))
        assert set(actions["piston_0"].tolist()) <= {0, 2}  # action 1 is masked
    assert seen and set(seen) == {torch.uint8}
    frag = fragment(algo)
    metrics = algo.learn(frag)
    assert np.isfinite(metrics["loss/value/piston"]) and metrics["epochs/piston"] == 2.0


def test_image_policies_mutate_and_keep_acting() -> None:
    algo = MAPPO(OBS, ACT, NET, seed=3)
    rng = np.random.default_rng(1)
    for kind in ("add_layer", "add_node", "remove_node"):
        algo.mutate_architecture(kind, rng)
    actions = algo.act(observations(3, 0))
    assert actions["rover_0"].shape == (3, 2)
    algo.learn(fragment(algo))
