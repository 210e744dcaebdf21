"""learn_batches() with weights: prioritised replay's importance weights scale each row's critic error,
and each row's new priority is its mean absolute TD error over the active agents' critics."""

from __future__ import annotations

import pytest
import torch

from distmarl.algorithms.offpolicy.batch import masked_mse
from tests.algorithms.helpers import (
    ACTION_SETS,
    AGENTS,
    Given,
    batch,
    draws_for,
    learns_with,
    make,
    next_q,
    params,
    target_action,
    target_noise,
)
from tests.algorithms.test_learning import _poison, critic_loss


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_unit_weights_learn_exactly_as_learn(algo: str) -> None:
    b = batch(ACTION_SETS["box"], size=32, seed=1)
    one = make(algo, "box")
    two = one.clone()
    m1 = one.learn(b)
    [m2], priorities = two.learn_batches([b], [torch.ones(32)])
    assert m1 == pytest.approx(m2, rel=1e-6) and priorities is not None
    assert priorities.shape == (32,)
    p1, p2 = params(one), params(two)
    assert all(torch.allclose(p1[k], p2[k], atol=1e-7) for k in p1)


def test_weights_scale_each_rows_squared_error() -> None:
    pred, target = torch.tensor([[1.0], [2.0], [3.0]]), torch.zeros(3, 1)
    mask, w = torch.tensor([[1.0], [1.0], [0.0]]), torch.tensor([[0.5], [0.25], [9.0]])
    assert float(masked_mse(pred, target, mask, w)) == pytest.approx((0.5 * 1 + 0.25 * 4) / 2)


def test_zero_weights_leave_the_critics_alone() -> None:
    agent = make("MADDPG", "box")
    before = params(agent)
    agent.learn_batches([batch(ACTION_SETS["box"], size=32, seed=2)], [torch.zeros(32)])
    after = params(agent)
    critics = [k for k in before if k.startswith("critic")]
    actors = [k for k in before if k.startswith("actor")]
    assert critics and all(torch.equal(before[k], after[k]) for k in critics)
    assert any(not torch.equal(before[k], after[k]) for k in actors)  # the actors still learn


def test_priorities_are_mean_abs_td_errors_of_the_active_agents() -> None:
    b = _poison(batch(ACTION_SETS["box"], size=16, seed=3), slice(0, 8), ["listener_0"])
    agent = make("MADDPG", "box")
    u = draws_for(agent, 16)
    learns_with(agent, Given([u]))
    errs = {}
    for a in AGENTS:  # per-row |q - y| by hand, before learning changes the critics
        errs[a] = critic_loss_rows(agent, b, f"critic/{a}", u)
    _, priorities = agent.learn_batches([b], [torch.ones(16)])  # unit weights: plain loss
    assert priorities is not None
    expected = torch.cat([errs["speaker_0"][:8],  # listener inactive: the speaker's alone
                          (errs["speaker_0"][8:] + errs["listener_0"][8:]) / 2])
    assert torch.allclose(torch.as_tensor(priorities), expected, rtol=1e-5, atol=1e-6)
    assert critic_loss(agent, b, "critic/speaker_0", u) >= 0


def critic_loss_rows(agent, b: dict, name: str, u: torch.Tensor) -> torch.Tensor:
    """Per-row ``|Q(s, a) - y|`` of critic ``name`` ``(B,)``, as a weighted update sees it."""
    from distmarl.algorithms.offpolicy.batch import clean_batch, td_target

    _, a = name.split("/")
    noise = target_noise(agent, u)
    c = clean_batch(b, agent.readers, agent.codecs, agent.device)
    with torch.no_grad():
        next_act = torch.cat([target_action(agent, x, c.next_obs[x], noise) * c.active[x]
                              for x in AGENTS], -1)
        y = td_target(c.reward[a], c.terminated[a], next_q(agent, a, c.joint_next_obs(), next_act),
                      agent.hp["gamma"])
        q = agent.nets.online[name](c.joint_obs(),
                                    torch.cat([c.action[x] * c.active[x] for x in AGENTS], -1))
    return (q - y).abs().reshape(-1)


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
@pytest.mark.parametrize("weighted", [False, True])
def test_learn_batches_is_learn_one_batch_after_another(algo: str, weighted: bool) -> None:
    """A train call's updates run back to back, read from the device once at the end: the
    same updates, metrics and priorities as one call per batch (on the same draws: a stack's
    stream starts anew at each call)."""
    from distmarl import tree

    raw = [batch(ACTION_SETS["box"], size=16, seed=s) for s in range(3)]
    one = make(algo, "box")
    two = one.clone()
    drawn = [draws_for(one, 16, seed=s) for s in range(3)]
    learns_with(one, Given(drawn))
    learns_with(two, Given(drawn))
    weights = [torch.rand(16, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    if weighted:
        done = [one.learn_batches([b], [w]) for b, w in zip(raw, weights)]
        expected, expected_p = [m[0] for m, _ in done], torch.cat(
            [torch.as_tensor(p) for _, p in done])
    else:
        expected, expected_p = [one.learn(b) for b in raw], None
    # as a learner reads them: views of one joined tensor per field and agent
    whole = tree.concat(raw)
    stacked = [tree.map(lambda t, s=s: t[16 * s:16 * (s + 1)], whole) for s in range(3)]
    got, priorities = two.learn_batches(stacked, weights if weighted else None)
    assert len(got) == 3 and all(g.keys() == e.keys() for g, e in zip(got, expected))
    assert all(g == pytest.approx(e, rel=1e-6) for g, e in zip(got, expected))
    if weighted:
        assert priorities is not None and priorities.shape == (48,)
        assert torch.allclose(torch.as_tensor(priorities), expected_p, rtol=1e-6)
    else:
        assert priorities is None
    p1, p2 = params(one), params(two)
    assert all(torch.allclose(p1[k], p2[k], atol=1e-7) for k in p1)
