"""IPPO / MAPPO acting: shapes, bounds, the recorded log-probs and values, action masks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from distmarl.algorithms import IPPO, MAPPO
from tests.algorithms.helpers import assert_actions_fit
from tests.algorithms.ppo_helpers import ACTION_SETS, AGENTS, NET, make, observations


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
@pytest.mark.parametrize("actions", ["box", "discrete", "mixed"])
def test_action_shapes_dtypes_bounds_and_extras(algo: str, actions: str) -> None:
    agent = make(algo, actions)
    for explore in (True, False):
        out, extras = agent.act_with_info(observations(7), explore=explore)
        assert list(out) == AGENTS and set(extras) == {"log_prob", "value"}
        assert_actions_fit(out, ACTION_SETS[actions], 7)
        for a in ACTION_SETS[actions]:
            for key in ("log_prob", "value"):
                assert extras[key][a].shape == (7,) and extras[key][a].dtype == np.float32
    assert list(agent.act(observations(2))) == AGENTS


def test_exploring_samples_and_greedy_is_the_tanh_mean_or_argmax() -> None:
    agent = make("IPPO", "mixed", seed=3)
    obs = observations(256)
    greedy = agent.act(obs, explore=False)
    assert all(np.array_equal(greedy[a], agent.act(obs, explore=False)[a]) for a in AGENTS)
    x = torch.as_tensor(obs["agent_0"])
    with torch.no_grad():
        mean = torch.tanh(agent.policy_net("agent")(x)).numpy()
        logits = agent.policy_net("speaker")(torch.as_tensor(obs["speaker_0"])).numpy()
    np.testing.assert_allclose(greedy["agent_0"], 0.5 + 0.5 * mean, atol=1e-6)
    assert np.array_equal(greedy["speaker_0"], logits.argmax(-1) + 1)
    sampled = agent.act(obs, explore=True)
    spread = np.std(sampled["agent_0"] - greedy["agent_0"])
    assert 0.1 < spread < 0.3  # std 0.5 of the half-range 0.5, a little clipped
    assert len(set(sampled["speaker_0"].tolist())) == 3


@pytest.mark.parametrize("actions", ["box", "discrete"])
def test_recorded_log_prob_is_the_policys_log_prob_of_the_returned_action(actions: str) -> None:
    agent = make("MAPPO", actions, seed=2)
    obs = observations(64)
    out, extras = agent.act_with_info(obs)
    for g, members in agent.groups.items():
        head = agent.heads[g]
        for a in members:
            with torch.no_grad():
                logp, _ = head.evaluate(agent.policy_net(g)(torch.as_tensor(obs[a])),
                                        agent.log_std.get(g), head.from_env(torch.as_tensor(out[a])),
                                        None)
            np.testing.assert_allclose(extras["log_prob"][a], logp.numpy(), atol=1e-5)


def test_nan_observations_act_like_zeros_and_missing_agents_are_skipped() -> None:
    agent = make("MAPPO", "mixed")
    obs = observations(4)
    obs["agent_1"][1] = np.nan
    zeros = {a: v.copy() for a, v in obs.items()}
    zeros["agent_1"][1] = 0.0
    (got, eg), (want, ew) = agent.act_with_info(obs, False), agent.act_with_info(zeros, False)
    assert all(np.array_equal(got[a], want[a]) for a in AGENTS)
    assert all(np.array_equal(eg["value"][a], ew["value"][a]) for a in AGENTS)
    only = agent.act_with_info({"speaker_0": obs["speaker_0"]})
    assert list(only[0]) == ["speaker_0"] and list(only[1]["value"]) == ["speaker_0"]


def masked_spaces() -> tuple[dict, dict]:
    obs = {f"p_{i}": spaces.Dict({"observation": spaces.Box(0, 1, (3, 3, 2), np.int8),
                                  "action_mask": spaces.Box(0, 1, (9,), np.int8)})
           for i in range(2)}
    return obs, {a: spaces.Discrete(9) for a in obs}


@pytest.mark.parametrize("cls", [IPPO, MAPPO])
def test_action_masks_from_dict_observations_and_from_the_caller(cls) -> None:
    obs_spaces, act_spaces = masked_spaces()
    agent = cls(obs_spaces, act_spaces, NET, seed=0)
    assert agent.policy_net("p").arch.encoder.in_dim == 18
    rng = np.random.default_rng(0)
    n = 200
    masks = {a: (rng.random((n, 9)) < 0.3).astype(np.int8) for a in obs_spaces}
    masks["p_0"][0] = 0  # no legal action at all: treated as unmasked
    none_legal = {a: m.sum(axis=1) == 0 for a, m in masks.items()}
    obs = {a: {"observation": rng.integers(0, 2, (n, 3, 3, 2)).astype(np.int8),
               "action_mask": masks[a]} for a in obs_spaces}
    for explore in (True, False):
        out, extras = agent.act_with_info(obs, explore=explore)
        for a in obs_spaces:
            legal = masks[a][np.arange(n), out[a]].astype(bool)
            assert (legal | none_legal[a]).all() and legal[~none_legal[a]].all()
            assert np.isfinite(extras["log_prob"][a]).all()
    # the same masks given by the caller, for plain observations
    plain = {a: o["observation"] for a, o in obs.items()}
    out = agent.act(plain, explore=True, action_mask=masks)
    assert (masks["p_1"][np.arange(n), out["p_1"]].astype(bool) | none_legal["p_1"]).all()


def test_gaussian_mean_stays_in_range_and_a_clipped_action_scores_the_mass_beyond_its_bound(
) -> None:
    """A raw output far past the bound: the mean is tanh(out), inside [-1, 1]; an action at a
    bound scores log P(sample beyond it) (about log 0.5 here, the mean being almost the bound),
    an interior action the Gaussian density."""
    from distmarl.algorithms.onpolicy.policy_heads import INIT_LOG_STD, GaussianHead

    head = GaussianHead(spaces.Box(0.0, 1.0, (2,)), torch.device("cpu"))
    out = torch.tensor([[8.0, -8.0]])
    log_std = torch.full((2,), INIT_LOG_STD)
    gen = torch.Generator().manual_seed(0)
    u, _ = head.sample(out.expand(512, 2), log_std, None, True, gen)
    assert u.min() >= -1.0 and u.max() <= 1.0
    assert 0.4 < float((u[:, 0] == 1.0).float().mean()) < 0.6  # half the samples clip at +1
    lp, _ = head.evaluate(out, log_std, torch.tensor([[1.0, -1.0]]), None)
    assert float(lp) == pytest.approx(2 * np.log(0.5), abs=1e-3)
    std, mean = 0.5, float(np.tanh(0.3))
    lp, _ = head.evaluate(torch.tensor([[0.3, 0.3]]), log_std, torch.tensor([[1.0, 0.2]]), None)
    above = np.log(0.5 * math.erfc((1.0 - mean) / (std * np.sqrt(2))))  # log P(N >= 1)
    density = -0.5 * ((0.2 - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    assert float(lp) == pytest.approx(above + density, abs=1e-5)
    np.testing.assert_allclose(head.to_env(torch.tanh(out)), [[1.0, 0.0]], atol=1e-6)


@pytest.mark.parametrize("log_std0", [float(np.log(0.5)), 0.1])
def test_gaussian_score_has_expectation_zero_with_clipping(log_std0: float) -> None:
    """The log-prob of clipped samples is a true likelihood: the mean over 200k samples of its
    gradient (w.r.t. the log-std and the raw output) is 0, with 14-47% of each dimension's
    samples clipped; scoring the bound by the density there gives 0.1 to 0.6 in size."""
    from distmarl.algorithms.onpolicy.policy_heads import GaussianHead

    head = GaussianHead(spaces.Box(0.0, 1.0, (2,)), torch.device("cpu"))
    n = 200_000
    out = torch.tensor([[0.5, -1.0]], requires_grad=True)
    log_std = torch.full((2,), log_std0, requires_grad=True)
    gen = torch.Generator().manual_seed(1)
    u, _ = head.sample(out.detach().expand(n, 2), log_std.detach(), None, True, gen)
    assert float((u.abs() >= 1.0).float().mean()) > 0.2
    lp, _ = head.evaluate(out.expand(n, 2), log_std, u, None)
    g_ls, g_out = torch.autograd.grad(lp.mean(), [log_std, out])
    np.testing.assert_allclose(g_ls.numpy(), 0.0, atol=0.01)  # standard error ~0.003
    np.testing.assert_allclose(g_out.numpy(), 0.0, atol=0.01)
    z = (u - torch.tanh(out)) / log_std.exp()
    at_bound = (-0.5 * z.pow(2) - log_std).sum(-1).mean()  # the density at the clipped point
    b_ls, b_out = torch.autograd.grad(at_bound, [log_std, out])
    assert float(b_ls.abs().min()) > 0.1 and float(b_out.abs().min()) > 0.1
