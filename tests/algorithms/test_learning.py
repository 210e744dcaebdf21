"""learn(): the critic loss falls, targets are right by hand, inactive rows change nothing."""

from __future__ import annotations

import pytest
import torch

from distmarl.algorithms.offpolicy.batch import clean_batch, masked_mean, masked_mse, td_target
from distmarl.algorithms.offpolicy.stack import smoothed
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


def critic_loss(agent, b: dict, name: str, u: torch.Tensor) -> float:
    """The loss ``learn`` would report for critic ``name`` on ``b``, without updating anything,
    with the update's uniform draws ``u`` (Gumbel samples for discrete targets, MATD3's
    smoothing)."""
    _, a = name.split("/")
    noise = target_noise(agent, u)
    c = clean_batch(b, agent.readers, agent.codecs, agent.device)
    with torch.no_grad():
        next_act = torch.cat([target_action(agent, x, c.next_obs[x], noise) for x in AGENTS],
                             -1)
        y = td_target(c.reward[a], c.terminated[a], next_q(agent, a, c.joint_next_obs(), next_act),
                      agent.hp["gamma"])
        q = agent.nets.online[name](c.joint_obs(), torch.cat(list(c.action.values()), -1))
        return float(masked_mse(q, y, c.active[a]))


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
@pytest.mark.parametrize("actions", ["box", "discrete", "mixed"])
def test_a_learn_step_lowers_the_critic_loss_on_a_fixed_batch(algo: str, actions: str) -> None:
    agent = make(algo, actions)
    b = batch(ACTION_SETS[actions], seed=1)
    names = [n for n in agent.nets.online if not n.startswith("actor")]
    u = draws_for(agent, len(b["active"][AGENTS[0]]))
    learns_with(agent, Given([u] * 31))
    before = {n: critic_loss(agent, b, n, u) for n in names}
    metrics = agent.learn(b)
    for n in names:
        role, a = n.split("/")
        assert metrics[f"loss/{role}/{a}"] == pytest.approx(before[n], rel=1e-6)
        after = critic_loss(agent, b, n, u)
        assert after < before[n] - 1e-3, (n, before[n], after)
    first = {k: v for k, v in metrics.items() if "critic" in k}
    for _ in range(30):
        metrics = agent.learn(b)
    assert all(metrics[k] < 0.25 * v for k, v in first.items()), (first, metrics)


def constant_q(agent, role: str, value: float, target: bool) -> None:
    """Make a critic output ``value`` everywhere: zero last-layer weights, bias = value."""
    for a in AGENTS:
        net = (agent.nets.target if target else agent.nets.online)[f"{role}/{a}"]
        with torch.no_grad():
            net.head.linears[-1].weight.zero_()
            net.head.linears[-1].bias.fill_(value)


def td_batch() -> dict:
    b = batch(ACTION_SETS["box"], size=4, seed=2)
    for a in AGENTS:
        b["reward"][a] = torch.tensor([[1.0], [2.0], [3.0], [100.0]])
        b["terminated"][a] = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
        b["truncated"][a] = torch.tensor([[0.0], [0.0], [1.0], [0.0]])
        b["active"][a] = torch.tensor([[1.0], [1.0], [1.0], [0.0]])
    return b


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_termination_stops_bootstrapping_and_truncation_does_not(algo: str) -> None:
    agent = make(algo, "box", gamma=0.5)
    constant_q(agent, "critic", 0.0, target=False)
    constant_q(agent, "critic", 4.0, target=True)
    if algo == "MATD3":  # the twin's target is higher: min() picks 4
        constant_q(agent, "critic_2", 0.0, target=False)
        constant_q(agent, "critic_2", 6.0, target=True)
    metrics = agent.learn(td_batch())
    # y = r + 0.5 * (1 - terminated) * 4 = [3, 2, 5] on the active rows; Q = 0
    expected = (3.0**2 + 2.0**2 + 5.0**2) / 3
    for a in AGENTS:
        assert metrics[f"loss/critic/{a}"] == pytest.approx(expected, rel=1e-6)
        if algo == "MATD3":
            assert metrics[f"loss/critic_2/{a}"] == pytest.approx(expected, rel=1e-6)


def test_td_target_and_masked_losses_by_hand() -> None:
    r = torch.tensor([[1.0], [2.0], [3.0]])
    term = torch.tensor([[0.0], [1.0], [0.0]])
    nq = torch.tensor([[10.0], [10.0], [-2.0]])
    assert td_target(r, term, nq, 0.9).flatten().tolist() == pytest.approx([10.0, 2.0, 1.2])
    x = torch.tensor([[1.0], [float("nan")], [3.0]])
    mask = torch.tensor([[1.0], [0.0], [1.0]])
    assert float(masked_mean(x, mask)) == 2.0
    assert float(masked_mean(x, torch.zeros(3, 1))) == 0.0
    assert float(masked_mse(x, torch.zeros(3, 1), mask)) == 5.0


def _poison(b: dict, rows: slice, agents: list[str]) -> dict:
    """NaN / huge garbage in ``rows`` of ``agents``, which are marked inactive there."""
    b = {f: {a: v.clone() for a, v in d.items()} for f, d in b.items()}
    for a in agents:
        for f in ("obs", "next_obs", "action", "reward"):
            b[f][a][rows] = float("nan")
        b["terminated"][a][rows] = 1.0
        b["active"][a][rows] = 0.0
    return b


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_rows_inactive_for_all_agents_change_nothing(algo: str) -> None:
    clean = batch(ACTION_SETS["box"], size=48, seed=3)
    padded = {f: {a: torch.cat([v, v[:16]]) for a, v in d.items()} for f, d in clean.items()}
    padded = _poison(padded, slice(48, 64), AGENTS)
    hp = {"policy_noise": 0.0} if algo == "MATD3" else {}  # smoothing noise draws depend on B
    one = make(algo, "box", **hp)
    two = one.clone()
    for _ in range(2):
        m1, m2 = one.learn(clean), two.learn(padded)
        assert m1 == pytest.approx(m2, rel=1e-6)
    p1, p2 = params(one), params(two)
    assert all(torch.allclose(p1[k], p2[k], rtol=0, atol=1e-6) for k in p1)
    assert all(torch.isfinite(v).all() for v in p2.values())


def test_nan_placeholders_of_an_inactive_agent_act_as_zeros() -> None:
    b = batch(ACTION_SETS["box"], size=32, seed=4)
    poisoned = _poison(b, slice(0, 8), ["listener_0"])
    zeroed = {f: {a: v.clone() for a, v in d.items()} for f, d in poisoned.items()}
    for f in ("obs", "next_obs", "reward"):
        zeroed[f]["listener_0"][:8] = 0.0
    zeroed["action"]["listener_0"][:8] = 0.5  # the middle of [0, 1]: 0 in critic form
    zeroed["terminated"]["listener_0"][:8] = 0.0
    one = make("MADDPG", "box")
    two = one.clone()
    m1, m2 = one.learn(poisoned), two.learn(zeroed)
    assert all(torch.isfinite(torch.tensor(v)) for v in m1.values())
    assert m1 == pytest.approx(m2, rel=1e-6)
    p1, p2 = params(one), params(two)
    assert all(torch.equal(p1[k], p2[k]) for k in p1)


def test_masked_rows_get_zero_critic_gradient() -> None:
    agent = make("MADDPG", "box")
    b = _poison(batch(ACTION_SETS["box"], size=8, seed=5), slice(0, 4), ["speaker_0"])
    c = clean_batch(b, agent.readers, agent.codecs, agent.device)
    obs = c.joint_obs().requires_grad_(True)
    q = agent.nets.online["critic/speaker_0"](obs, torch.cat(list(c.action.values()), -1))
    masked_mse(q, torch.ones_like(q), c.active["speaker_0"]).backward()
    assert torch.count_nonzero(obs.grad[:4]) == 0 and torch.count_nonzero(obs.grad[4:]) > 0


def test_matd3_updates_actors_and_targets_every_policy_freq_steps() -> None:
    agent = make("MATD3", "box", policy_freq=3)
    b = batch(ACTION_SETS["box"], seed=6)
    actors0, targets0 = params(agent), params(agent, "target")
    keys = [k for k in agent.learn(b)]  # step 0: due
    assert "loss/actor/speaker_0" in keys
    actors1, targets1 = params(agent), params(agent, "target")
    for _ in range(2):  # steps 1, 2: critics only
        assert not any(k.startswith("loss/actor") for k in agent.learn(b))
    actors3, targets3 = params(agent), params(agent, "target")
    actor_keys = [k for k in actors0 if k.startswith("actor/")]
    assert all(not torch.equal(actors0[k], actors1[k]) for k in actor_keys if k.endswith("bias"))
    assert all(torch.equal(actors1[k], actors3[k]) for k in actor_keys)
    assert all(torch.equal(targets1[k], targets3[k]) for k in targets1)
    assert any(not torch.equal(targets0[k], targets1[k]) for k in targets0)
    assert "loss/actor/speaker_0" in agent.learn(b) and agent.learn_steps == 4


def test_matd3_target_smoothing_is_clipped_and_stays_in_range() -> None:
    u = torch.tanh(torch.randn(256, 3, generator=torch.Generator().manual_seed(0)))
    noise = torch.randn(256, 3, generator=torch.Generator().manual_seed(1))
    out = smoothed(u, noise, 10.0, 0.3)
    diff = out - u
    inside = (u.abs() < 0.7)  # where the bounds cannot cut the noise
    assert diff.abs().max() <= 0.3 + 1e-6 and diff[inside].abs().max() > 0.29
    assert out.min() >= -1.0 and out.max() <= 1.0
    assert torch.equal(smoothed(u, noise, 0.0, 0.3), u)


def test_soft_update_moves_targets_by_tau() -> None:
    agent = make("MADDPG", "box", tau=0.25)
    online0, target0 = params(agent), params(agent, "target")
    assert all(torch.equal(online0[k], target0[k]) for k in online0)
    agent.learn(batch(ACTION_SETS["box"], seed=7))
    online1, target1 = params(agent), params(agent, "target")
    for k in online1:
        torch.testing.assert_close(target1[k], 0.75 * target0[k] + 0.25 * online1[k])


def test_missing_fields_and_agents_are_named() -> None:
    agent = make("MADDPG", "box")
    b = batch(ACTION_SETS["box"], size=4)
    with pytest.raises(KeyError, match=r"lacks fields \['truncated'\]"):
        agent.learn({k: v for k, v in b.items() if k != "truncated"})
    b["reward"] = {"speaker_0": b["reward"]["speaker_0"]}
    with pytest.raises(KeyError, match=r"batch\['reward'\] lacks agents \['listener_0'\]"):
        agent.learn(b)


def _first_grad_norm(agent, name: str) -> float:
    """The norm of the (clipped) gradient network ``name`` took its first Adam step on:
    after one step Adam's first moment is ``(1 - beta1)`` times it."""
    opt = agent.nets.optim[name]
    beta1 = opt.param_groups[0]["betas"][0]
    moments = [opt.state_of(p)["exp_avg"] for p in agent.nets.online[name].parameters()]
    return float(torch.linalg.vector_norm(torch.cat([m.reshape(-1) for m in moments]))) / (1 - beta1)


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_max_grad_norm_clips_every_network_and_zero_does_not(algo: str) -> None:
    b = batch(ACTION_SETS["box"], size=64, seed=3)
    clipped, free = make(algo, max_grad_norm=1e-3), make(algo, max_grad_norm=0.0)
    clipped.learn(b)
    free.learn(b)
    names = ["critic/speaker_0", "critic/listener_0", "actor/speaker_0", "actor/listener_0"]
    for name in names:
        assert _first_grad_norm(clipped, name) <= 1e-3 * (1 + 1e-4), name
        assert _first_grad_norm(free, name) > 1e-2, name  # so the clip above did something


def test_the_actor_loss_gives_the_critic_no_gradient() -> None:
    """The actor step differentiates only the actors: after one update a critic's Adam moment
    is its own loss's gradient alone (by hand, on the same draws), whatever the actor loss
    through that critic would add."""
    agent = make("MADDPG", max_grad_norm=0.0)
    b = batch(ACTION_SETS["box"], size=32, seed=4)
    u = draws_for(agent, 32)
    learns_with(agent, Given([u]))
    noise = target_noise(agent, u)
    critic = agent.nets.online["critic/speaker_0"]
    c = clean_batch(b, agent.readers, agent.codecs, agent.device)
    with torch.no_grad():
        next_act = torch.cat([target_action(agent, x, c.next_obs[x], noise) for x in AGENTS],
                             -1)
        y = td_target(c.reward["speaker_0"], c.terminated["speaker_0"],
                      next_q(agent, "speaker_0", c.joint_next_obs(), next_act), agent.hp["gamma"])
    q = critic(c.joint_obs(), torch.cat(list(c.action.values()), -1))
    own = torch.autograd.grad(masked_mse(q, y, c.active["speaker_0"]), list(critic.parameters()))
    agent.learn(b)
    opt = agent.nets.optim["critic/speaker_0"]
    for p, g in zip(critic.parameters(), own, strict=True):
        torch.testing.assert_close(opt.state_of(p)["exp_avg"], 0.1 * g, rtol=1e-4, atol=1e-8)


def test_actor_reg_keeps_pre_activation_outputs_small() -> None:
    b = batch(ACTION_SETS["box"], size=64, seed=6)
    obs = b["obs"]["listener_0"]
    sizes = {}
    for reg in (0.0, 10.0):
        agent = make("MADDPG", actor_reg=reg, lr_actor=1e-2)
        for _ in range(40):
            agent.learn(b)
        with torch.no_grad():
            sizes[reg] = float(agent.actor("listener_0")(obs).pow(2).mean())
    assert sizes[10.0] < 0.2 * sizes[0.0], sizes


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_a_seat_the_member_does_not_play_is_part_of_the_env_to_its_critics(algo: str) -> None:
    """A league member's rows where an opponent holds the listener's seat: whatever the
    opponent did, and whatever this member's (never trained) listener actor would do, the
    speaker's critics and actor learn the same."""
    b = batch(ACTION_SETS["box"], size=32, seed=6)
    b["active"]["listener_0"][:] = 0.0
    other = {f: {a: v.clone() for a, v in d.items()} for f, d in b.items()}
    other["action"]["listener_0"] = torch.rand_like(other["action"]["listener_0"])
    hp = {"policy_noise": 0.0} if algo == "MATD3" else {}
    one = make(algo, "box", **hp)
    two = one.clone()
    with torch.no_grad():
        for p in two.nets.target["actor/listener_0"].parameters():
            p.add_(1.0)
    for _ in range(2):
        one.learn(b)
        two.learn(other)
    p1, p2 = params(one), params(two)
    speaker = [k for k in p1 if "speaker_0" in k]
    assert speaker and all(torch.allclose(p1[k], p2[k], atol=1e-6) for k in speaker)


def test_n_step_targets_discount_each_reward_and_bootstrap_with_gamma_to_the_k() -> None:
    reward = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 0.0], [5.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    n_steps = torch.tensor([[3.0], [2.0], [1.0], [3.0]])
    terminated = torch.tensor([[0.0], [0.0], [0.0], [1.0]])
    next_q = torch.full((4, 1), 10.0)
    y = td_target(reward, terminated, next_q, 0.9, n_steps)
    expected = [1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 10, 1 + 0.9 * 2 + 0.81 * 10, 5 + 0.9 * 10,
                1 + 0.9 + 0.81]  # the last terminated inside its window: no bootstrap
    assert y.reshape(-1).tolist() == pytest.approx(expected)


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_n_step_batches_learn_and_one_step_windows_learn_as_one_step_rows(algo: str) -> None:
    b = batch(ACTION_SETS["box"], size=32, seed=6)
    windowed = {**b, "reward": {a: v.reshape(-1, 1) for a, v in b["reward"].items()},
                "n_steps": {a: torch.ones(32) for a in AGENTS}}
    hp = {"policy_noise": 0.0} if algo == "MATD3" else {}
    one = make(algo, "box", **hp)
    two = one.clone()
    assert one.learn(b) == pytest.approx(two.learn(windowed), rel=1e-6)
    three = {**b, "reward": {a: v.reshape(-1, 1).repeat(1, 3) for a, v in b["reward"].items()},
             "n_steps": {a: torch.full((32,), 3.0) for a in AGENTS}}
    metrics = make(algo, "box", **hp).learn(three)
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
