"""Evaluation on fixed episodes: a seed names the same episodes for every policy, in a fixed
order, and the same weights score the same twice."""

from __future__ import annotations

from typing import Any

import numpy as np

from distmarl.algorithms import MADDPG
from distmarl.collect import RandomPolicy, evaluate, fixed_scores
from distmarl.envs import make_vector_env

NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [16]}, "head_config": {"hidden_size": [16]}}


def venv(num_envs: int = 3) -> Any:
    return make_vector_env("mpe2:simple_speaker_listener_v4", num_envs, mode="sync", seed=0,
                           continuous_actions=True, max_cycles=5)


def maddpg(v: Any, seed: int) -> MADDPG:
    agents = list(v.possible_agents)
    return MADDPG({a: v.single_observation_space(a) for a in agents},
                  {a: v.single_action_space(a) for a in agents}, NET, seed=seed)


class FirstObs:
    """Wraps a policy and keeps the observations it saw, to tell which episodes were played."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.seen = policy, []

    def act(self, obs: dict[str, np.ndarray], explore: bool = True) -> dict[str, np.ndarray]:
        self.seen.append(np.concatenate([obs[a] for a in sorted(obs)], axis=1).copy())
        return self.policy.act(obs, explore=explore)


def test_the_same_weights_score_the_same_on_the_fixed_episodes_twice() -> None:
    with venv() as v:
        algo = maddpg(v, seed=1)
        first = fixed_scores(v, algo, episodes=7, seed=123)
        evaluate(v, algo, episodes=2, seed=9)  # the venv is used meanwhile
        second = fixed_scores(v, algo, episodes=7, seed=123)
        other = fixed_scores(v, algo, episodes=7, seed=124)
    assert len(first) == 7 and first == second
    assert first != other  # the seed picks the episodes


def test_every_policy_plays_the_same_episodes_of_a_seed() -> None:
    """Episodes start where the seed puts them, whatever the policy does: a trained policy and
    random play see the same first observations (every 5th step starts an episode)."""
    with venv() as v:
        trained = FirstObs(maddpg(v, seed=1))
        fixed_scores(v, trained, episodes=6, seed=5)
        random = FirstObs(RandomPolicy({a: v.single_action_space(a) for a in v.possible_agents}, 0))
        random_scores = fixed_scores(v, random, episodes=6, seed=5)
    assert len(trained.seen) == len(random.seen) == 10  # 2 episodes per sub-env, 5 steps each
    for step in (0, 5):
        np.testing.assert_array_equal(trained.seen[step], random.seen[step])
    assert not np.array_equal(trained.seen[1], random.seen[1])  # the actions differ
    assert len(random_scores) == 6


def test_scores_come_in_episode_order_and_stop_at_the_count_asked() -> None:
    with venv(num_envs=3) as v:
        algo = maddpg(v, seed=2)
        scores = evaluate(v, algo, episodes=2, seed=11)  # sub-env i's k-th at k * 3 + i
        assert len(scores) == 6
        assert fixed_scores(v, algo, episodes=4, seed=11) == scores[:4]


def test_a_sampled_evaluation_repeats_from_its_seed_and_differs_from_the_mean_policy() -> None:
    """``explore``: an on-policy member's stochastic policy is scored by sampling it; seeded the
    same way, the same weights score the same."""
    from distmarl.algorithms import IPPO

    with venv() as v:
        agents = list(v.possible_agents)
        algo = IPPO({a: v.single_observation_space(a) for a in agents},
                    {a: v.single_action_space(a) for a in agents}, NET, seed=1)
        mean = fixed_scores(v, algo, episodes=6, seed=7)
        algo.reseed(7)
        sampled = fixed_scores(v, algo, episodes=6, seed=7, explore=True)
        algo.reseed(7)
        again = fixed_scores(v, algo, episodes=6, seed=7, explore=True)
        algo.reseed(8)
        other_stream = fixed_scores(v, algo, episodes=6, seed=7, explore=True)
    assert sampled == again
    assert sampled != mean and sampled != other_stream
