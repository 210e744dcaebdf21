"""The Collector's off-policy path: time-major rows of the off-policy fields, true final
observations, episode figures, exploration noise restarted where an episode ended."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.algorithms import MADDPG
from distmarl.collect import Collector, evaluate
from distmarl.envs import make_vector_env
from distmarl.types import N_STEPS_FIELD, OFF_POLICY_FIELDS, RolloutSpec

NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [16]}, "head_config": {"hidden_size": [16]}}


class CountingMADDPG(MADDPG):
    """MADDPG that records the masks it restarts its noise for."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.resets: list[list[bool]] = []

    def reset_noise(self, mask: np.ndarray) -> None:
        self.resets.append(mask.tolist())
        super().reset_noise(mask)


def test_off_policy_rows_are_time_major_with_true_final_observations() -> None:
    with make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        agents = list(venv.possible_agents)
        algo = CountingMADDPG({a: venv.single_observation_space(a) for a in agents},
                              {a: venv.single_action_space(a) for a in agents}, NET, seed=0)
        collector = Collector(venv, algo, seed=0)
        rollout = collector.collect(7)
    data = rollout.data
    assert collector.fields == OFF_POLICY_FIELDS and list(data) == list(OFF_POLICY_FIELDS)
    assert rollout.env_steps == 14 and collector.total_steps == 14
    assert data["obs"]["agent_0"].shape == (14, 18) and data["action"]["agent_0"].shape == (14, 5)
    assert data["active"]["agent_2"].all() and data["terminated"]["agent_2"].sum() == 0
    assert len(rollout.episode_scores) == 2 and rollout.episode_lengths == [5, 5]
    # row t * E + e is step t of sub-env e; step 4 ends both episodes
    assert data["truncated"]["agent_0"].reshape(7, 2)[4].tolist() == [True, True]
    assert np.array_equal(data["next_obs"]["agent_1"][2 * 3 + 1], data["obs"]["agent_1"][2 * 4 + 1])
    assert not np.array_equal(data["next_obs"]["agent_1"][2 * 4], data["obs"]["agent_1"][2 * 5])
    assert algo.resets == [[True, True]]


def test_evaluate_scores_each_sub_env_episode_once() -> None:
    with make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        agents = list(venv.possible_agents)
        algo = MADDPG({a: venv.single_observation_space(a) for a in agents},
                      {a: venv.single_action_space(a) for a in agents}, NET, seed=0)
        scores = evaluate(venv, algo, episodes=2, seed=3)
        again = evaluate(venv, algo, episodes=2, seed=3)
    assert len(scores) == 4 and scores == again and all(s < 0 for s in scores)


def test_n_step_rows_sum_each_episodes_rewards_once_and_never_cross_a_reset() -> None:
    n, steps, envs = 3, 12, 2
    with make_vector_env("mpe2:simple_spread_v3", envs, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        agents = list(venv.possible_agents)
        spaces = ({a: venv.single_observation_space(a) for a in agents},
                  {a: venv.single_action_space(a) for a in agents})
        one = Collector(venv, MADDPG(*spaces, NET, seed=0), seed=0).collect(steps)
    with make_vector_env("mpe2:simple_spread_v3", envs, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        collector = Collector(venv, MADDPG(*spaces, NET, seed=0), seed=0,
                              spec=RolloutSpec(on_policy=False, n_step=n))
        multi = collector.collect(steps)
    data = multi.data
    assert list(data) == [*OFF_POLICY_FIELDS, N_STEPS_FIELD] and multi.env_steps == steps * envs
    # episodes of 5 steps (0-4, 5-9): steps 10 and 11 wait for their windows
    assert len(data["reward"]["agent_0"]) == steps * envs - collector.window.pending == 20
    k = data[N_STEPS_FIELD]["agent_0"].reshape(10, envs)[:, 0]
    assert k.tolist() == [3, 3, 3, 2, 1, 3, 3, 3, 2, 1]
    # the same actions (same seeds): row t's window holds rewards t .. t + k - 1
    r1 = one.data["reward"]["agent_0"].reshape(steps, envs)
    rn = data["reward"]["agent_0"].reshape(10, envs, n)
    for t in range(10):
        for i in range(n):
            expected = r1[t + i] if i < k[t] else 0.0
            np.testing.assert_allclose(rn[t, :, i], expected, rtol=1e-6)
    # next_obs is the window's last step's (the true final one where the episode ended)
    np.testing.assert_array_equal(data["next_obs"]["agent_1"].reshape(10, envs, -1)[3],
                                  one.data["next_obs"]["agent_1"].reshape(steps, envs, -1)[4])
    assert data["truncated"]["agent_0"].reshape(10, envs)[:, 0].tolist() == [
        False, False, True, True, True] * 2


def test_a_collector_takes_another_algorithm_of_its_family_only() -> None:
    from distmarl.algorithms import IPPO, MATD3

    with make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", seed=0,
                         continuous_actions=True, max_cycles=5) as venv:
        agents = list(venv.possible_agents)
        spaces = ({a: venv.single_observation_space(a) for a in agents},
                  {a: venv.single_action_space(a) for a in agents})
        collector = Collector(venv, MADDPG(*spaces, NET, seed=0), seed=0)
        collector.collect(2)
        matd3 = MATD3(*spaces, NET, seed=0)
        collector.set_algorithm(matd3)
        assert collector.algo is matd3 and collector.collect(2).env_steps == 4
        with pytest.raises(ValueError, match="IPPO stores"):
            collector.set_algorithm(IPPO(*spaces, NET, seed=0))
