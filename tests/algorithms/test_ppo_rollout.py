"""Collector and fragment_to_batch: fragments with behaviour log-probs and values, true
final observations, action masks from obs dicts and from infos, learning from them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.algorithms import IPPO, MAPPO, ON_POLICY_FIELDS
from distmarl.collect import Collector, fragment_to_batch
from distmarl.envs import EnvFactory, VectorParallelEnv, make_vector_env
from tests.algorithms.ppo_helpers import NET, MaskedInfoEnv


def spaces_of(venv) -> tuple[dict, dict]:
    return ({a: venv.single_observation_space(a) for a in venv.possible_agents},
            {a: venv.single_action_space(a) for a in venv.possible_agents})


def test_fragments_of_simple_spread_with_a_truncation() -> None:
    with make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        algo = MAPPO(*spaces_of(venv), NET, seed=0)
        collector = Collector(venv, algo, seed=0)
        rollout = collector.collect(7)
    data = rollout.data
    assert list(data) == list(ON_POLICY_FIELDS) and rollout.env_steps == 14
    assert data["obs"]["agent_0"].shape == (14, 18) and data["action"]["agent_0"].shape == (14, 5)
    assert data["log_prob"]["agent_2"].dtype == np.float32 and data["value"]["agent_2"].shape == (14,)
    assert len(rollout.episode_scores) == 2 and rollout.episode_lengths == [5, 5]
    batch = fragment_to_batch(data, num_envs=2)
    assert batch["obs"]["agent_1"].shape == (7, 2, 18) and batch["active"]["agent_1"].dtype == torch.float32
    # row t * E + e is step t of sub-env e
    assert np.array_equal(batch["obs"]["agent_1"][3, 1].numpy(), data["obs"]["agent_1"][7])
    trunc = batch["truncated"]["agent_0"]
    assert trunc[4].tolist() == [1.0, 1.0] and trunc.sum() == 2
    # inside an episode the next value is the next step's value; the truncated row's is the
    # value of the final observation, not of the reset one at row 5
    nv, v = batch["next_value"]["agent_0"], batch["value"]["agent_0"]
    assert torch.equal(nv[3], v[4]) and not torch.allclose(nv[4], v[5])
    assert "next_obs" not in batch
    metrics = algo.learn(batch)
    assert np.isfinite(metrics["loss/value/agent"])
    with pytest.raises(ValueError, match="do not split"):
        fragment_to_batch(data, num_envs=3)


def test_info_action_masks_are_used_and_stored_with_the_observation() -> None:
    venv = VectorParallelEnv([MaskedInfoEnv] * 3, mode="sync", seed=0)
    algo = IPPO(*spaces_of(venv), NET, seed=1)
    rollout = Collector(venv, algo, seed=0).collect(8)  # illegal actions would raise
    obs = rollout.data["obs"]["bob_1"]
    assert set(obs) == {"observation", "action_mask"} and obs["action_mask"].shape == (24, 4)
    legal = obs["action_mask"].argmax(axis=1)
    assert np.array_equal(rollout.data["action"]["bob_1"], legal)
    assert np.allclose(rollout.data["log_prob"]["bob_1"], 0.0, atol=1e-5)  # one legal action
    metrics = algo.learn(fragment_to_batch(rollout.data, 3))
    assert metrics["approx_kl/bob"] == pytest.approx(0.0, abs=1e-6)
    venv.close()


def test_turn_taking_dict_observations_with_masks() -> None:
    with VectorParallelEnv([EnvFactory("pettingzoo.classic:tictactoe_v3")] * 2, mode="sync",
                           seed=0) as venv:
        algo = IPPO(*spaces_of(venv), NET, seed=0)
        assert list(algo.groups) == ["player"]  # player_1 and player_2 share one policy
        rollout = Collector(venv, algo, seed=0).collect(12)
    active = rollout.data["active"]
    # exactly one player acts per step and sub-env, the first step of an episode included
    assert not (active["player_1"] & active["player_2"]).any()
    assert (active["player_1"] | active["player_2"]).all()
    ended = (rollout.data["terminated"]["player_1"] | rollout.data["truncated"]["player_1"])
    starts = np.concatenate([np.ones(2, dtype=bool), ended[:-2]])  # rows of t = 0 or after an end
    assert active["player_1"][starts].all()  # player_1 always moves first
    obs, act = rollout.data["obs"]["player_1"], rollout.data["action"]["player_1"]
    mover = active["player_1"]
    assert obs["action_mask"][mover, act[mover]].all()  # legal moves only
    metrics = algo.learn(fragment_to_batch(rollout.data, 2))
    assert all(np.isfinite(v) for v in metrics.values())
