"""A stack's random draws: one uniform draw per update for every member and agent, turned into
the right distributions, repeatable from the members' generators (and so from a checkpoint)."""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

from benchmarks.micro.step_ops import count_ops
from distmarl.algorithms.offpolicy.draws import DrawPlan, StackDraws
from distmarl.algorithms.offpolicy.stack import OffPolicyStack
from tests.algorithms.helpers import ACTION_SETS, batch, make


def _samples(members: list, rows: int, updates: int = 1) -> list[tuple[dict, dict]]:
    """``updates`` updates' samples of a stack of ``members`` (one call)."""
    m = members[0]
    plan = DrawPlan(m.agents, m.codecs, m.SMOOTHED_TARGETS)
    draws = StackDraws(m.device)
    draws.start_call(members)
    return [plan.split(draws.uniform((len(members), rows, plan.width), m.device))
            for _ in range(updates)]


def test_the_draws_have_their_distributions_and_are_independent() -> None:
    """MATD3 with a discrete and a Box agent, 8 members: Gumbel samples for the discrete
    agent's target and actor loss, standard normal smoothing for the Box agent's target; each
    column's samples pass a Kolmogorov-Smirnov test, and members, rows and columns are
    uncorrelated."""
    members = [make("MATD3", "mixed", seed=k) for k in range(8)]
    (target, policy), = _samples(members, rows=512)
    gumbels = [target["listener_0"]["codec"], policy["listener_0"]["codec"]]
    normal = target["speaker_0"]["smooth"]
    assert set(target) == {"speaker_0", "listener_0"} and set(policy) == {"listener_0"}
    for x in gumbels:
        assert stats.kstest(x.flatten().numpy(), stats.gumbel_r.cdf).pvalue > 1e-3
    assert stats.kstest(normal.flatten().numpy(), stats.norm.cdf).pvalue > 1e-3
    columns = torch.cat([gumbels[0], gumbels[1], normal], dim=-1)  # (K, B, width)
    for flat in (columns.permute(1, 0, 2).reshape(512, -1),  # members x columns, over rows
                 columns.reshape(-1, columns.shape[-1])):  # columns, over members and rows
        corr = np.corrcoef(flat.numpy(), rowvar=False)
        off = corr[~np.eye(len(corr), dtype=bool)]
        assert np.abs(off).max() < 0.2  # 512+ samples: independent columns stay far below


def test_draws_repeat_from_the_members_generators_and_change_with_each_call() -> None:
    members = [make("MADDPG", "discrete", seed=k) for k in range(3)]
    saved = [m.state_dict() for m in members]
    first = _samples(members, rows=16, updates=2)
    second = _samples(members, rows=16, updates=1)
    for m, state in zip(members, saved, strict=True):  # a checkpoint's members draw again
        m.load_state_dict(state)
    again = _samples(members, rows=16, updates=2)
    for (t1, _), (t2, _) in zip(first, again, strict=True):
        assert torch.equal(t1["speaker_0"]["codec"], t2["speaker_0"]["codec"])
    assert not torch.equal(first[0][0]["speaker_0"]["codec"], first[1][0]["speaker_0"]["codec"])
    assert not torch.equal(first[0][0]["speaker_0"]["codec"], second[0][0]["speaker_0"]["codec"])


def test_a_stack_that_draws_nothing_leaves_its_members_generators_alone() -> None:
    """MADDPG with Box actions draws nothing: no draws are made, and its members' generators
    do not move."""
    members = [make("MADDPG", "box", seed=k) for k in range(2)]
    stack = OffPolicyStack(members)
    assert stack.plan.width == 0
    before = [m._rng.bit_generator.state for m in members]
    stack.learn_batches([[batch(ACTION_SETS["box"], size=8, seed=k)] for k in range(2)])
    assert [m._rng.bit_generator.state for m in members] == before


def test_an_updates_inputs_take_as_many_operations_for_any_number_of_members() -> None:
    """Discrete and Box agents under MATD3 (Gumbel samples and smoothing): an update's inputs,
    draws included, dispatch as many torch operations for 8 members as for 2."""
    counts = []
    for k in (2, 8):
        members = [make("MATD3", "mixed", seed=i) for i in range(k)]
        stack = OffPolicyStack(members)
        batches = [[batch(ACTION_SETS["mixed"], size=16, seed=i)] for i in range(k)]
        stack.learn_batches(batches)
        firsts, hp = [b[0] for b in batches], stack._hp()
        counts.append(count_ops(lambda s=stack, x=firsts, h=hp: s._inputs(x, h, None)))
    assert counts[0] == counts[1]
