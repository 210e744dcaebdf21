"""PPO updates: the surrogate objective improves, masked rows change nothing, target-KL early
stop, hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.algorithms.onpolicy.fragment import clean_fragment
from distmarl.algorithms.onpolicy.ppo_loss import ppo_terms
from distmarl.config.hparams import default_hp
from tests.algorithms.ppo_helpers import AGENTS, fragment, make, params


def group_losses(algo, batch, advantage=None):
    """Per group: (clipped surrogate loss, value loss) of ``algo`` on the whole ``batch``, with
    the advantages given (default: the ones ``algo`` computes now)."""
    heads = {a: algo.heads[algo.group_of[a]] for a in AGENTS}
    frag = clean_fragment(batch, algo.readers, heads, algo.device)
    adv, target = algo._advantages(frag) if advantage is None else advantage
    out = {}
    with torch.no_grad():
        for g in algo.groups:
            d = algo._group_rows(g, frag, adv, target)
            logp, ent = algo.heads[g].evaluate(algo.policy_net(g)(d.obs), algo.log_std.get(g),
                                               d.action, d.mask)
            v = algo.value_net(g)(d.critic_obs).squeeze(-1)
            t = ppo_terms(logp, d.log_prob, d.advantage, ent, v, d.value_target, d.active,
                          algo.hp["clip_coef"], 0.0, 1.0)
            out[g] = (float(t.policy), float(t.value))
    return out, (adv, target)


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
@pytest.mark.parametrize("actions", ["box", "discrete"])
def test_an_update_improves_the_surrogate_objective_on_a_fixed_batch(algo, actions) -> None:
    agent = make(algo, actions, seed=1, batch_size=32, update_epochs=4, lr=3e-3)
    batch = fragment(agent, t=16, e=4, seed=3)
    before, adv = group_losses(agent, batch)
    metrics = agent.learn(batch)
    after, _ = group_losses(agent, batch, advantage=adv)  # the same advantages as learn used
    for g in agent.groups:
        # at the behaviour policy the ratio is 1: the loss is -mean(normalised advantage) = 0
        assert before[g][0] == pytest.approx(0.0, abs=1e-5)
        assert after[g][0] < -5e-3, (g, after[g])
        assert after[g][1] < before[g][1]  # the value loss goes down too
        assert metrics[f"epochs/{g}"] == 4
    assert {"loss/policy/agent", "loss/value/agent", "entropy/agent", "approx_kl/agent",
            "clip_fraction/speaker", "approx_kl"} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values())


@pytest.mark.parametrize("algo, fills", [("IPPO", (0.0, float("nan"), 1e30)),
                                         ("MAPPO", (0.0, float("nan")))])
def test_inactive_rows_change_nothing_whatever_they_hold(algo: str, fills: tuple) -> None:
    """Rows of inactive agents may hold anything (MAPPO: anything that stands for "absent",
    NaN or 0, since the other agents' value networks read every agent's observation). Their
    rewards and terminations are read (a waiting player's go to its last move): an absent
    agent's are NaN or 0, which count as nothing."""
    agent = make(algo, "mixed", seed=2, batch_size=32, update_epochs=2)
    batch = fragment(agent, t=8, e=3, seed=4)
    inactive = torch.zeros(8, 3, dtype=torch.bool)
    inactive[2, 1] = inactive[5] = inactive[7, 0] = True  # incl. a fragment-end row

    def with_rows(fill: float) -> dict:
        b = {f: {a: v.clone().float() if f != "action" or v.is_floating_point() else v.clone()
                 for a, v in per.items()} for f, per in batch.items()}
        for a in ["agent_1", "speaker_0"]:
            b["active"][a][inactive] = 0.0
            for f in ("obs", "log_prob", "value"):
                b[f][a][inactive] = fill
            for f in ("reward", "terminated"):
                b[f][a][inactive] = fill if np.isnan(fill) else 0.0
            if b["action"][a].is_floating_point():
                b["action"][a][inactive] = fill
            else:
                b["action"][a][inactive] = 12345
        return b

    runs = []
    for fill in fills:
        twin = agent.clone()
        metrics = twin.learn(with_rows(fill))
        runs.append((params(twin), metrics))
    for p, m in runs:
        assert all(torch.isfinite(v).all() for v in p.values())
        assert all(torch.equal(p[k], runs[0][0][k]) for k in p)
        assert m == runs[0][1]


def test_a_fragment_with_no_active_row_leaves_the_weights_alone() -> None:
    agent = make("IPPO", "box")
    batch = fragment(agent, t=4, e=2)
    for a in AGENTS:
        batch["active"][a] = torch.zeros_like(batch["active"][a])
    before = params(agent)
    agent.learn(batch)
    assert all(torch.equal(before[k], v) for k, v in params(agent).items())


def test_scalar_fields_may_come_as_t_e_1() -> None:
    a, b = make("IPPO", "mixed", seed=5), make("IPPO", "mixed", seed=5)
    batch = fragment(make("IPPO", "mixed", seed=5), t=6, e=2)
    wide = {f: {k: (v.unsqueeze(-1) if v.dim() == 2 else v) for k, v in per.items()}
            for f, per in batch.items()}
    assert a.learn(batch) == b.learn(wide)
    with pytest.raises(ValueError, match="time-major"):
        a.learn({f: {k: v.reshape(12, *v.shape[2:]) for k, v in per.items()}
                 for f, per in batch.items()})


def test_target_kl_stops_the_epochs_early() -> None:
    # approx_kl of a minibatch is measured before its step (CleanRL), so the first epoch's
    # mean is > 0 when it has more than one minibatch
    agent = make("IPPO", "mixed", seed=1, update_epochs=5, target_kl=1e-9, batch_size=8)
    metrics = agent.learn(fragment(agent, t=8, e=2))
    assert metrics["epochs/agent"] == 1 and metrics["epochs/speaker"] == 1
    agent.set_hyperparameter("target_kl", None)
    assert agent.learn(fragment(agent, t=8, e=2))["epochs/agent"] == 5


def test_hyperparameters_are_checked_and_lr_takes_effect_at_once() -> None:
    assert make("IPPO").hp == default_hp("IPPO")
    with pytest.raises(ValueError, match="no hyperparameter 'lr_actor'"):
        make("IPPO", lr_actor=1e-3)
    for name, bad in (("update_epochs", 0), ("gae_lambda", 1.5), ("clip_coef", -0.1),
                      ("lr", 0.0), ("target_kl", "high")):
        with pytest.raises(ValueError, match=name):
            make("MAPPO", **{name: bad})
    agent = make("MAPPO", "mixed")
    agent.learn(fragment(agent, t=4, e=2))
    moments = agent.nets.optim["policy/agent"].state_dict()["state"][0]["exp_avg"].clone()
    agent.set_hyperparameter("lr", 0.123)
    optims = [*agent.nets.optim.values(), *agent.log_std_optim.values()]
    assert all(g["lr"] == 0.123 for opt in optims for g in opt.param_groups)
    # Adam's moments are kept
    assert torch.equal(agent.nets.optim["policy/agent"].state_dict()["state"][0]["exp_avg"],
                       moments)
    assert agent.hp["lr"] == 0.123 and isinstance(make("IPPO", update_epochs=3.0).hp[
        "update_epochs"], int)


def test_masked_rows_get_exactly_zero_gradient_even_when_they_overflow() -> None:
    new_log_prob = torch.tensor([-1.0, -2.0, 50.0], requires_grad=True)
    new_value = torch.tensor([0.5, 1.0, 1e20], requires_grad=True)
    old_log_prob = torch.tensor([-1.1, -1.9, -1e30])  # exp(new - old) overflows on row 2
    advantage = torch.tensor([1.0, -1.0, float("nan")])
    target = torch.tensor([1.0, 0.0, float("inf")])
    active = torch.tensor([True, True, False])
    terms = ppo_terms(new_log_prob, old_log_prob, advantage, torch.zeros(3), new_value, target,
                      active, 0.2, 0.01, 0.5, normalise_advantage=False)
    terms.loss.backward()
    assert torch.isfinite(terms.loss)
    assert new_log_prob.grad[2] == 0 and new_value.grad[2] == 0
    assert torch.isfinite(new_log_prob.grad).all() and new_log_prob.grad[:2].abs().sum() > 0


def test_a_huge_log_prob_difference_gives_a_finite_loss_and_gradient() -> None:
    """A policy mean far outside the action box gives the clipped action a huge log-prob: the
    ratio's exp must not overflow (it did, and spread's IPPO ended with NaN actions)."""
    new = torch.tensor([0.0, 5_000.0, -5_000.0], requires_grad=True)
    terms = ppo_terms(new, torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]), torch.zeros(3),
                      torch.zeros(3), torch.zeros(3), torch.ones(3, dtype=torch.bool),
                      0.2, 0.0, 0.5, normalise_advantage=False)
    terms.loss.backward()
    assert torch.isfinite(terms.loss) and torch.isfinite(new.grad).all()


def test_a_non_finite_gradient_is_skipped_and_the_weights_stay_finite(monkeypatch) -> None:
    agent = make("IPPO", "box")
    batch = fragment(agent, t=4, e=2)
    group, head = next(iter(agent.heads.items()))
    evaluate = head.evaluate

    def poisoned(*args, **kwargs):  # as if the policy had produced an overflowing value
        log_prob, entropy = evaluate(*args, **kwargs)
        return log_prob * float("nan"), entropy

    monkeypatch.setattr(head, "evaluate", poisoned)
    before = params(agent)
    metrics = agent.learn(batch)
    after = params(agent)
    assert all(torch.isfinite(v).all() for v in after.values())
    assert sum(v for k, v in metrics.items() if k.startswith("skipped_steps")) > 0, metrics
    poisoned_nets = [k for k in after if k.startswith((f"policy/{group}/", f"value/{group}/"))]
    assert poisoned_nets
    for k in poisoned_nets:  # no step was taken on the poisoned group's networks
        assert torch.equal(before[k], after[k]), k
