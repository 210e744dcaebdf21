"""act(): shapes, dtypes and bounds for every space kind; NaN placeholders; noise processes."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.algorithms import MADDPG, GaussianNoise, OUNoise
from tests.algorithms.helpers import (
    ACTION_SETS,
    AGENTS,
    NET,
    OBS,
    assert_actions_fit,
    make,
    observations,
)


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
@pytest.mark.parametrize("actions", ["box", "discrete", "mixed"])
def test_action_shapes_dtypes_and_bounds(algo: str, actions: str) -> None:
    agent = make(algo, actions, expl_noise=5.0)  # noise far beyond the bounds: clipping shows
    for explore in (True, False):
        out = agent.act(observations(7), explore=explore)
        assert list(out) == AGENTS
        assert_actions_fit(out, ACTION_SETS[actions], 7)


def test_multidimensional_box_and_discrete_observations() -> None:
    obs_spaces = {"a_0": spaces.Box(-1, 1, (2, 3), np.float32), "b_0": spaces.Discrete(4)}
    act_spaces = {"a_0": spaces.Box(-1, 1, (2, 2), np.float32), "b_0": spaces.Discrete(2, start=1)}
    agent = MADDPG(obs_spaces, act_spaces, NET, seed=0)
    out = agent.act({"a_0": np.zeros((3, 2, 3), np.float32), "b_0": np.array([0, 3, 1])})
    assert out["a_0"].shape == (3, 2, 2) and out["b_0"].shape == (3,)
    assert set(out["b_0"].tolist()) <= {1, 2}
    assert agent.nets.online["critic/a_0"].arch.encoder.in_dim == 6 + 4
    assert agent.nets.online["critic/a_0"].arch.extra_dim == 4 + 2


def test_nan_observations_act_like_zeros_and_missing_agents_are_skipped() -> None:
    agent = make("MADDPG", "mixed")
    obs = observations(4)
    obs["listener_0"][1] = np.nan
    zeros = {a: v.copy() for a, v in obs.items()}
    zeros["listener_0"][1] = 0.0
    got, want = agent.act(obs, explore=False), agent.act(zeros, explore=False)
    assert all(np.array_equal(got[a], want[a]) for a in AGENTS)
    assert list(agent.act({"speaker_0": obs["speaker_0"]})) == ["speaker_0"]


def test_greedy_actions_are_deterministic_and_exploration_adds_noise() -> None:
    agent = make("MADDPG", "box")
    obs = observations(5)
    greedy = agent.act(obs, explore=False)["speaker_0"]
    assert np.array_equal(greedy, agent.act(obs, explore=False)["speaker_0"])
    assert not np.array_equal(greedy, agent.act(obs, explore=True)["speaker_0"])


def test_ou_noise_matches_its_formula_and_resets_only_masked_envs() -> None:
    noise = OUNoise(3, 2, np.random.default_rng(0), expl_noise=0.5, mean_noise=0.1, theta=0.15, dt=0.01)
    z = np.random.default_rng(0).standard_normal((2, 3, 2))
    x1 = 0.1 + 0.5 * 0.1 * z[0]  # starts at the mean: no drift in the first step
    np.testing.assert_allclose(noise.sample(), x1, rtol=1e-6)
    x2 = x1 + 0.15 * (0.1 - x1) * 0.01 + 0.5 * 0.1 * z[1]
    np.testing.assert_allclose(noise.sample(), x2, rtol=1e-6)
    noise.reset(np.array([False, True, False]))
    np.testing.assert_allclose(noise.x, np.stack([x2[0], [0.1, 0.1], x2[2]]), rtol=1e-6)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        noise.reset(np.array([True]))


def test_gaussian_noise_statistics() -> None:
    sample = GaussianNoise(2000, 3, np.random.default_rng(1), expl_noise=0.2, mean_noise=0.5).sample()
    assert sample.shape == (2000, 3) and sample.dtype == np.float32
    assert abs(sample.mean() - 0.5) < 0.01 and abs(sample.std() - 0.2) < 0.01


def test_reset_noise_restarts_ended_sub_envs_of_every_agent() -> None:
    agent = make("MADDPG", "box", expl_noise=0.3)
    for _ in range(3):
        agent.act(observations(4))
    agent.reset_noise(np.array([True, False, True, False]))
    for a in AGENTS:
        x = agent._noise[a].x
        assert np.all(x[[0, 2]] == 0.0) and np.all(x[[1, 3]] != 0.0)
    gaussian = make("MADDPG", "box", O_U_noise=False)
    gaussian.act(observations(2))
    assert isinstance(gaussian._noise["speaker_0"], GaussianNoise)


def test_unsupported_spaces_are_refused() -> None:
    with pytest.raises(TypeError, match="unsupported action space"):
        MADDPG(OBS, {"speaker_0": spaces.MultiDiscrete([2, 2]), "listener_0": spaces.Discrete(2)}, NET)
    with pytest.raises(ValueError, match="finite bounds"):
        MADDPG(OBS, {"speaker_0": spaces.Box(-np.inf, np.inf, (2,)), "listener_0": spaces.Discrete(2)},
               NET)
    with pytest.raises(ValueError, match="action spaces for"):
        MADDPG(OBS, {"speaker_0": spaces.Discrete(2)}, NET)
