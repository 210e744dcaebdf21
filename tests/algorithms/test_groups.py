"""A stacked update of several members equals each member's own update, one after another."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from distmarl.algorithms import MADDPG
from distmarl.algorithms.groups import (
    OffPolicyStack,
    OnPolicyStack,
    Stacks,
    plan_stacks,
    stack_problem,
)
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from tests.algorithms.helpers import (
    ACTION_SETS,
    AGENTS,
    NET,
    Given,
    Recorded,
    batch,
    learns_with,
    make,
    params,
)

#: three members' hyperparameters, each different (a clip of 0: none; an actor_reg of 0: none)
HP = [dict(lr_actor=1e-3, lr_critic=2e-3, gamma=0.95, tau=0.01, max_grad_norm=0.5,
           actor_reg=1e-3),
      dict(lr_actor=5e-4, lr_critic=1e-3, gamma=0.9, tau=0.02, max_grad_norm=0.0,
           actor_reg=0.0),
      dict(lr_actor=2e-4, lr_critic=5e-4, gamma=0.99, tau=0.005, max_grad_norm=1.0,
           actor_reg=1e-2)]
#: MATD3's own: actor updates due at different steps, smoothing on and off
MATD3_HP = [dict(policy_freq=2, policy_noise=0.2), dict(policy_freq=1, policy_noise=0.0),
            dict(policy_freq=3, policy_noise=0.1)]
#: 24 updates, the members gathered and written back 3 times (every MATD3 member's actor
#: update falls due on some call). The two sides agree to float32 rounding (about 1e-7) step
#: by step; where a ReLU unit or MATD3's twin-critic minimum sits at its kink, that rounding
#: can pick the other side of it in one and not the other, and the difference then grows
#: with the updates (as it does between the loop and the loop with its critics nudged by
#: 1e-6). These batches keep clear of that.
ROWS, CALLS, UPDATES = 24, 3, 8


def members(algo: str, actions: str) -> list[OffPolicyMultiAgent]:
    extra = MATD3_HP if algo == "MATD3" else [{}] * 3
    return [make(algo, actions, seed=k, **HP[k], **extra[k]) for k in range(3)]


def rows(actions: str, seed: int) -> dict[str, Any]:
    """A batch with inactive rows, terminations and 3-step rows (n-step replay)."""
    b = batch(ACTION_SETS[actions], size=ROWS, seed=seed)
    g = torch.Generator().manual_seed(seed + 10_000)
    for a in AGENTS:
        b["active"][a] = (torch.rand(ROWS, 1, generator=g) > 0.2).float()
        b["terminated"][a] = (torch.rand(ROWS, 1, generator=g) > 0.8).float()
        b["reward"][a] = torch.randn(ROWS, 3, generator=g)
    b["n_steps"] = {a: torch.randint(1, 4, (ROWS, 1), generator=g).float() for a in AGENTS}
    return b


def adam_state(algo: OffPolicyMultiAgent) -> dict[str, torch.Tensor]:
    out = {}
    for n, opt in algo.nets.optim.items():
        for i, p in enumerate(opt.param_groups[0]["params"]):
            for key in ("exp_avg", "exp_avg_sq", "step"):
                out[f"{n}/{i}/{key}"] = torch.as_tensor(opt.state[p][key]).float()
    return out


def worst(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def assert_stacked_as_alone(stacked_members: list[OffPolicyMultiAgent],
                            own: list[OffPolicyMultiAgent], batches: list[list[Any]]) -> None:
    """``stacked_members`` learning ``batches`` in one stack end as ``own`` (their clones)
    do, each alone on its rows of the stack's draws: the same metrics and parameters."""
    drawn = Recorded()
    results = OffPolicyStack(stacked_members, draws=drawn).learn_batches(batches)
    for k, m in enumerate(own):
        metrics, _ = learns_with(m, Given(drawn.drawn, member=k)).learn_batches(batches[k])
        for x, y in zip(results[k][0], metrics, strict=True):
            assert x == pytest.approx(y, rel=1e-4, abs=1e-5)
        assert worst(params(stacked_members[k]), params(m)) < 1e-5


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("algo,actions,weighted", [
    ("MADDPG", "box", False), ("MADDPG", "discrete", True), ("MATD3", "box", True),
    ("MATD3", "mixed", False)])
def test_a_stacked_update_is_each_members_own(algo: str, actions: str, weighted: bool,
                                              mode: str) -> None:
    """Three members with their own hyperparameters, batches (inactive rows, terminations,
    3-step rows), importance weights and random draws: after 24 stacked updates each one's
    parameters, targets, Adam state and counters are what its own 24 updates give (on its rows
    of the stack's draws), and so were each update's metrics and priorities. ``static`` runs
    the step a CUDA graph captures (no decision on the host) eagerly."""
    stacked_members = members(algo, actions)
    drawn = Recorded()
    own = [learns_with(m.clone(), Given(drawn.drawn, member=k))
           for k, m in enumerate(stacked_members)]
    group = OffPolicyStack(stacked_members, mode=mode, draws=drawn)  # type: ignore[arg-type]
    seed = 0
    for _ in range(CALLS):
        batches = [[rows(actions, seed := seed + 1) for _ in range(UPDATES)] for _ in own]
        weights = ([[torch.rand(ROWS, generator=torch.Generator().manual_seed(i * 97 + k))
                     for i in range(UPDATES)] for k in range(len(own))] if weighted else None)
        results = group.learn_batches(batches, weights)
        for k, m in enumerate(own):
            metrics, priorities = m.learn_batches(batches[k], None if weights is None
                                                  else weights[k])
            got_metrics, got_priorities = results[k]
            assert [sorted(x) for x in got_metrics] == [sorted(x) for x in metrics]
            for x, y in zip(got_metrics, metrics, strict=True):
                assert x == pytest.approx(y, rel=1e-4, abs=1e-5)
            if weighted:
                np.testing.assert_allclose(got_priorities, priorities, rtol=1e-4, atol=1e-5)
            else:
                assert got_priorities is None and priorities is None
    for k, m in enumerate(own):
        s = stacked_members[k]
        assert worst(params(s), params(m)) < 1e-5
        assert worst(params(s, "target"), params(m, "target")) < 1e-5
        assert worst(adam_state(s), adam_state(m)) < 1e-5
        assert s.learn_steps == m.learn_steps == CALLS * UPDATES


@pytest.mark.parametrize("algo,actions", [("MADDPG", "discrete"), ("MATD3", "mixed")])
def test_a_stack_of_one_gives_its_member_its_own_updates(algo: str, actions: str) -> None:
    """A stack of one built by hand gives its member what the member's own ``learn_batches``
    (its kept stack of one) gives: the same updates, metrics and priorities."""
    (alone,) = members(algo, actions)[:1]
    own = alone.clone()
    group = OffPolicyStack([alone])
    batches = [rows(actions, u) for u in range(6)]
    weights = [torch.rand(ROWS, generator=torch.Generator().manual_seed(u)) for u in range(6)]
    [(metrics, priorities)] = group.learn_batches([batches], [weights])
    own_metrics, own_priorities = own.learn_batches(batches, weights)
    for x, y in zip(metrics, own_metrics, strict=True):
        assert x == pytest.approx(y, rel=1e-4, abs=1e-5)
    np.testing.assert_allclose(priorities, own_priorities, rtol=1e-4, atol=1e-5)
    assert worst(params(alone), params(own)) < 1e-5
    assert worst(params(alone, "target"), params(own, "target")) < 1e-5
    assert worst(adam_state(alone), adam_state(own)) < 1e-5


def test_the_static_step_masks_actor_updates_when_no_member_is_due() -> None:
    """MATD3 members whose actor updates are all due every other step, with a Gumbel-drawing
    agent: on the steps where none is due the static step still runs the actors' part (zeros
    where the draws would be) and changes nothing of it; each member ends as its own."""
    stacked_members = [make("MATD3", "mixed", seed=k, **HP[k], policy_freq=2,
                            policy_noise=0.1) for k in range(3)]
    drawn = Recorded()
    own = [learns_with(m.clone(), Given(drawn.drawn, member=k))
           for k, m in enumerate(stacked_members)]
    batches = [[rows("mixed", 100 * k + u) for u in range(6)] for k in range(3)]
    results = OffPolicyStack(stacked_members, mode="static", draws=drawn).learn_batches(batches)
    for k, m in enumerate(own):
        metrics, _ = m.learn_batches(batches[k])
        assert [sorted(x) for x in results[k][0]] == [sorted(x) for x in metrics]
        due = [any(n.startswith("loss/actor") for n in x) for x in results[k][0]]
        assert due == [True, False] * 3  # steps 1, 3 and 5: no member due
        assert worst(params(stacked_members[k]), params(m)) < 1e-5
        assert worst(params(stacked_members[k], "target"), params(m, "target")) < 1e-5
        assert worst(adam_state(stacked_members[k]), adam_state(m)) < 1e-5


def test_a_graph_needs_cuda_and_modes_are_named() -> None:
    pair = [make("MADDPG", "box", seed=k) for k in range(2)]
    with pytest.raises(ValueError, match="mode 'fast': one of eager, static, compiled, graph"):
        OffPolicyStack(pair, mode="fast")  # type: ignore[arg-type]
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA graph needs a CUDA device, not cpu"):
            OffPolicyStack(pair, mode="graph")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU")
@pytest.mark.parametrize("algo,actions", [("MADDPG", "discrete"), ("MATD3", "mixed")])
def test_a_captured_stacked_update_is_each_members_own(algo: str, actions: str) -> None:
    extra = MATD3_HP if algo == "MATD3" else [{}] * 3
    stacked_members = [make(algo, actions, seed=k, device="cuda", **HP[k], **extra[k])
                       for k in range(3)]
    drawn = Recorded("cuda")
    own = [learns_with(m.clone(), Given(drawn.drawn, member=k))
           for k, m in enumerate(stacked_members)]
    batches = [[rows(actions, 100 * k + u) for u in range(8)] for k in range(3)]
    weights = [[torch.rand(ROWS, generator=torch.Generator().manual_seed(u)) for u in range(8)]
               for _ in range(3)]
    results = OffPolicyStack(stacked_members, mode="graph",
                             draws=drawn).learn_batches(batches, weights)
    for k, m in enumerate(own):
        metrics, priorities = m.learn_batches(batches[k], weights[k])
        for x, y in zip(results[k][0], metrics, strict=True):
            assert x == pytest.approx(y, rel=1e-4, abs=1e-5)
        np.testing.assert_allclose(results[k][1], priorities, rtol=1e-4, atol=1e-5)
        assert worst(params(stacked_members[k]), params(m)) < 1e-5
        assert worst(adam_state(stacked_members[k]), adam_state(m)) < 1e-5


def test_members_of_different_shapes_or_algorithms_are_refused() -> None:
    a, b = make("MADDPG", "box", seed=0), make("MADDPG", "box", seed=1)
    assert stack_problem([a, b]) is None
    assert "MATD3" in str(stack_problem([make("MATD3", "box"), a]))
    grown = make("MADDPG", "box", seed=2)
    grown.mutate_architecture("add_node", np.random.default_rng(0))
    assert "differ in shape" in str(stack_problem([a, grown]))
    with pytest.raises(ValueError, match="cannot be stacked: member 1's networks differ"):
        OffPolicyStack([a, grown])


def test_members_whose_adam_settings_differ_are_refused_naming_the_optimiser() -> None:
    """A stack steps one Adam: a member whose optimisers differ in betas or eps among
    themselves, or from member 0's, is refused before anything is stacked."""
    a, b = make("MADDPG", "box", seed=0), make("MADDPG", "box", seed=1)
    b.nets.optim["critic/listener_0"].param_groups[0]["eps"] = 1e-6
    assert stack_problem([a, b]) == "member 1's optimisers differ in their Adam betas or eps"
    for opt in b.nets.optim.values():
        opt.param_groups[0]["eps"] = 1e-6
    with pytest.raises(ValueError, match="cannot be stacked: member 1's optimiser of "
                                         "actor/speaker_0 is not like member 0's"):
        OffPolicyStack([a, b])


def test_members_whose_batch_sizes_differ_are_padded_and_update_as_their_own() -> None:
    """Batch sizes evolve: a member's smaller batch is padded with inactive rows; each
    member's update and priorities are still its own (on its rows of the stack's draws)."""
    stacked_members = [make("MADDPG", "mixed", seed=k, **HP[k]) for k in range(3)]
    drawn = Recorded()
    own = [learns_with(m.clone(), Given(drawn.drawn, member=k))
           for k, m in enumerate(stacked_members)]
    group = OffPolicyStack(stacked_members, draws=drawn)
    sizes = [24, 16, 9]
    batches = [[batch(ACTION_SETS["mixed"], size=n, seed=10 * k + u) for u in range(5)]
               for k, n in enumerate(sizes)]
    weights = [[torch.rand(n, generator=torch.Generator().manual_seed(u)) for u in range(5)]
               for n in sizes]
    results = group.learn_batches(batches, weights)
    for k, m in enumerate(own):
        metrics, priorities = m.learn_batches(batches[k], weights[k])
        assert results[k][1] is not None and results[k][1].shape == (5 * sizes[k],)
        np.testing.assert_allclose(results[k][1], priorities, rtol=1e-4, atol=1e-5)
        for x, y in zip(results[k][0], metrics, strict=True):
            assert x == pytest.approx(y, rel=1e-4, abs=1e-5)
        assert worst(params(stacked_members[k]), params(m)) < 1e-5


def test_masked_members_of_different_batch_sizes_update_as_their_own() -> None:
    """Dict observations with action masks (PettingZoo's form), Discrete actions, batches of
    different sizes: joined, cleaned at once and split, each member's update is its own."""
    from gymnasium import spaces

    obs = {a: spaces.Dict({"observation": spaces.Box(-1.0, 1.0, (4,), np.float32),
                           "action_mask": spaces.Box(0, 1, (n,), np.int8)})
           for a, n in (("speaker_0", 3), ("listener_0", 5))}
    act = ACTION_SETS["discrete"]
    stacked_members = [MADDPG(obs, act, NET, hp=HP[k], seed=k) for k in range(3)]
    own = [m.clone() for m in stacked_members]

    def masked(rows: int, seed: int) -> dict[str, Any]:
        g = np.random.default_rng(seed)
        b = batch(act, size=rows, seed=seed)
        for field in ("obs", "next_obs"):
            for a, space in obs.items():
                n = space["action_mask"].shape[0]
                mask = (g.random((rows, n)) > 0.4).astype(np.int8)
                mask[np.arange(rows), g.integers(0, n, rows)] = 1  # one legal action at least
                b[field][a] = {"observation": g.standard_normal((rows, 4)).astype(np.float32),
                               "action_mask": mask}
        return b

    sizes = [12, 7, 12]
    batches = [[masked(n, 10 * k + u) for u in range(5)] for k, n in enumerate(sizes)]
    assert_stacked_as_alone(stacked_members, own, batches)


# ---------------------------------------------------------------------------------- on-policy
#: three IPPO / MAPPO members' hyperparameters (update_epochs and batch_size are shared)
PPO_HP = [dict(lr=3e-4, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
               target_kl=None, value_norm=False),
          dict(lr=1e-3, clip_coef=0.1, ent_coef=0.0, vf_coef=1.0, max_grad_norm=1.0,
               target_kl=3e-5, value_norm=True),
          dict(lr=5e-4, clip_coef=0.3, ent_coef=0.05, vf_coef=0.25, max_grad_norm=0.2,
               target_kl=2e-3, value_norm=False)]
PPO_CALLS = 3  # 4 epochs of 12 minibatches (group "agent"): up to 144 steps per member


@pytest.mark.parametrize("algo,actions", [("IPPO", "mixed"), ("MAPPO", "box"),
                                          ("IPPO", "discrete")])
def test_a_stacked_ppo_update_is_each_members_own(algo: str, actions: str) -> None:
    """Three members with their own hyperparameters (the target-KL stop cutting some
    members' epochs short, value normalisation in one) and fragments, each acted by the
    member's own policy: after the stacked updates each one's parameters, log-stds, Adam
    state, counters and random stream are what its own updates give, and so were the
    metrics."""
    from tests.algorithms import ppo_helpers as ph

    stacked_members = [ph.make(algo, actions, seed=k, update_epochs=4, batch_size=8, **PPO_HP[k])
                       for k in range(3)]
    own = [m.clone() for m in stacked_members]
    group = OnPolicyStack(stacked_members)
    stopped_early = False
    steps = [0, 0, 0]
    for call in range(PPO_CALLS):
        frags = [ph.fragment(m.clone(), t=8, e=4, seed=call * 10 + k)
                 for k, m in enumerate(stacked_members)]
        got = group.learn(frags)
        for k, m in enumerate(own):
            want = m.learn(frags[k])
            assert got[k].keys() == want.keys()
            assert got[k] == pytest.approx(want, rel=1e-4, abs=1e-6)
            stopped_early |= any(v < 4 for key, v in want.items() if key.startswith("epochs/"))
            steps[k] += int(want["epochs/agent"]) * 12
    assert stopped_early, "the target-KL stop should cut some member's epochs short"
    assert max(steps) >= 100  # gradient steps of group "agent" (12 minibatches an epoch)
    for k, m in enumerate(own):
        s = stacked_members[k]
        assert worst(ph.params(s), ph.params(m)) < 1e-5
        assert s.learn_steps == m.learn_steps == PPO_CALLS
        assert torch.equal(torch.rand(4, generator=s._torch_gen),
                           torch.rand(4, generator=m._torch_gen))


@pytest.mark.parametrize("algo", ["IPPO", "MAPPO"])
def test_ppo_members_with_image_and_dict_observations_stack_as_their_own(algo: str) -> None:
    """CNN and multi-input encoders (run under vmap within their banks), masks from dict
    observations, a Discrete and a Box group: three members stacked end where each alone
    does."""
    from distmarl.algorithms import IPPO, MAPPO
    from tests.algorithms import ppo_helpers as ph
    from tests.algorithms import test_image_onpolicy as images

    cls = IPPO if algo == "IPPO" else MAPPO
    hp = [{k: v for k, v in h.items() if k != "target_kl"} for h in PPO_HP]
    stacked_members = [cls(images.OBS, images.ACT, images.NET, seed=k,
                           hp={"batch_size": 4, "update_epochs": 2, **hp[k]}) for k in range(3)]
    own = [m.clone() for m in stacked_members]
    group = OnPolicyStack(stacked_members)
    for _ in range(2):
        frags = [images.fragment(m.clone()) for m in stacked_members]
        got = group.learn(frags)
        for k, m in enumerate(own):
            assert got[k] == pytest.approx(m.learn(frags[k]), rel=1e-4, abs=1e-6)
    for k, m in enumerate(own):
        assert worst(ph.params(stacked_members[k]), ph.params(m)) < 1e-5


def test_a_ppo_stack_is_kept_and_a_mutated_member_moves_to_a_stack_of_its_shape() -> None:
    """Members live in their stack's slots from call to call; a member whose architecture
    was mutated leaves for a stack of its new shape (alone here), then two mutated alike
    stack together again. Through all of it each member ends as its own updates leave it."""
    from tests.algorithms import ppo_helpers as ph

    hosted = [ph.make("IPPO", seed=k, update_epochs=2, batch_size=16, **PPO_HP[k])
              for k in range(3)]
    own = [m.clone() for m in hosted]
    stacks = Stacks()

    def call(u: int) -> None:
        frags = [ph.fragment(m.clone(), t=4, e=4, seed=10 * u + k) for k, m in enumerate(hosted)]
        stacks.fragments(hosted, frags)
        for m, f in zip(own, frags, strict=True):
            m.learn(f)

    def storage(m: Any) -> Any:
        return m.policy_net("agent").head.linears[0].weight.untyped_storage()

    call(0)
    held = storage(hosted[0])
    assert {storage(m).data_ptr() for m in hosted} == {held.data_ptr()}  # slots of one stack
    call(1)
    assert {storage(m).data_ptr() for m in hosted} == {held.data_ptr()}  # the stack was kept
    for m in (hosted[0], own[0]):
        m.mutate_architecture("add_node", np.random.default_rng(5))
    assert plan_stacks(hosted) == [[0], [1, 2]]
    call(2)
    for m in (hosted[1], own[1]):
        m.mutate_architecture("add_node", np.random.default_rng(5))
    assert plan_stacks(hosted) == [[0, 1], [2]]
    call(3)
    assert storage(hosted[0]).data_ptr() == storage(hosted[1]).data_ptr()
    for m, o in zip(hosted, own, strict=True):
        assert worst(ph.params(m), ph.params(o)) < 1e-5
        assert m.learn_steps == o.learn_steps == 4


def test_ppo_members_with_other_epochs_are_refused() -> None:
    from tests.algorithms import ppo_helpers as ph

    a, b = ph.make("IPPO", seed=0), ph.make("IPPO", seed=1, update_epochs=2)
    assert "update_epochs" in str(stack_problem([a, b]))
    with pytest.raises(ValueError, match="cannot be stacked: member 1's update_epochs is 2"):
        OnPolicyStack([a, b])


# ------------------------------------------------------------------------ a learner's members
def test_a_learners_members_stack_by_shape_and_each_learns_as_its_own() -> None:
    """Two MADDPG members of one shape stack; a grown one and a MATD3 one learn alone; one
    with no batches (a refused sample) learns nothing: each ends as its own updates leave
    it."""
    grown = make("MADDPG", "box", seed=2, **HP[2])
    grown.mutate_architecture("add_node", np.random.default_rng(0))
    hosted = [make("MADDPG", "box", seed=0, **HP[0]), make("MADDPG", "box", seed=1, **HP[1]),
              grown, make("MATD3", "box", seed=3), make("MADDPG", "box", seed=4)]
    assert plan_stacks(hosted) == [[0, 1, 4], [2], [3]]
    own = [m.clone() for m in hosted]
    batches = [[rows("box", 10 * k + u) for u in range(3)] for k in range(4)] + [[]]
    weights = [[torch.rand(ROWS) for _ in b] for b in batches]
    results = Stacks().replay(hosted, batches, weights)
    for k, m in enumerate(own):
        metrics, priorities = m.learn_batches(batches[k], weights[k]) if batches[k] else ([], None)
        assert len(results[k][0]) == len(metrics)
        assert (results[k][1] is None) == (priorities is None)
        assert worst(params(hosted[k]), params(m)) < 1e-5


def test_ppo_members_stack_by_epochs_and_each_learns_as_its_own() -> None:
    from tests.algorithms import ppo_helpers as ph

    hosted = [ph.make("IPPO", seed=0), ph.make("IPPO", seed=1),
              ph.make("IPPO", seed=2, update_epochs=2)]
    assert plan_stacks(hosted) == [[0, 1], [2]]
    own = [m.clone() for m in hosted]
    frags = [ph.fragment(m.clone(), t=8, e=4, seed=k) for k, m in enumerate(hosted)]
    frags[1] = None  # no fragment waiting for this member
    results = Stacks().fragments(hosted, frags)
    assert results[1] is None and hosted[1].learn_steps == 0
    for k in (0, 2):
        assert results[k] == pytest.approx(own[k].learn(frags[k]), rel=1e-4, abs=1e-6)
        assert worst(ph.params(hosted[k]), ph.params(own[k])) < 1e-5


def test_a_stack_is_kept_across_calls_and_built_again_when_a_member_changes() -> None:
    """Members live in their stack's slots from call to call (their parameters stay where
    they are); a learning-rate change reaches the kept stack, a loaded state or a mutation
    makes it be built again. Through all of it each member ends as its own updates leave
    it."""
    hosted = [make("MADDPG", "box", seed=k, **HP[k]) for k in range(3)]
    own = [m.clone() for m in hosted]
    stacks = Stacks()

    def call(u: int) -> None:
        batches = [[rows("box", 100 * u + 10 * k + i) for i in range(2)] for k in range(3)]
        stacks.replay(hosted, batches)
        for m, b in zip(own, batches, strict=True):
            m.learn_batches(b)

    def storage(m: Any) -> Any:
        return m.actor("speaker_0").head.linears[0].weight.untyped_storage()

    call(0)
    held = storage(hosted[0])  # held, so that a new stack could not reuse its memory
    assert {storage(m).data_ptr() for m in hosted} == {held.data_ptr()}  # slots of one stack
    for m in (hosted[1], own[1]):
        m.set_hyperparameter("lr_critic", 3e-3)
    call(1)
    assert {storage(m).data_ptr() for m in hosted} == {held.data_ptr()}  # the stack was kept
    for m in (hosted[2], own[2]):  # member 2 becomes a copy of member 0: into its slot
        m.load_state_dict(hosted[0].state_dict())
    assert {storage(m).data_ptr() for m in hosted} == {held.data_ptr()}
    kept = stacks._kept[tuple(id(m) for m in hosted)]
    call(2)
    assert stacks._kept[tuple(id(m) for m in hosted)] is kept  # the stack was kept
    for m in (hosted[0], own[0]):
        m.mutate_architecture("add_node", np.random.default_rng(5))
    call(3)
    for m, o in zip(hosted, own, strict=True):
        assert worst(params(m), params(o)) < 1e-5
        assert m.learn_steps == o.learn_steps == 8


def test_a_member_that_does_not_step_stays_exactly_as_it_was() -> None:
    """Stacked Adam with members masked out: one whose gradient is not finite and one never
    stepped before (step count 0) keep their parameters and state to the bit, and nothing
    turns NaN."""
    from distmarl.algorithms.common.stacked_adam import StackedAdam, adam_step

    gen = torch.Generator().manual_seed(0)
    params = {"w": torch.randn(3, 4, 5, generator=gen), "b": torch.randn(3, 4, generator=gen)}
    adam = StackedAdam({k: torch.rand_like(p) for k, p in params.items()},
                       {k: torch.rand_like(p) for k, p in params.items()},
                       {k: torch.tensor([5.0, 0.0, 2.0]) for k in params}, (0.9, 0.999), 1e-8)
    grads = {k: torch.randn(p.shape, generator=gen) for k, p in params.items()}
    grads["w"][2, 0, 0] = float("nan")
    before = [x.clone() for x in (*params.values(), *adam.m.values(), *adam.v.values())]
    adam_step([adam], [params], [grads], torch.tensor([1e-2, 1e-2, 1e-2]),
              torch.tensor([True, False, False]))
    after = [*params.values(), *adam.m.values(), *adam.v.values()]
    assert all(bool(torch.isfinite(x).all()) for x in after)
    for x, y in zip(after, before, strict=True):
        assert torch.equal(x[1:], y[1:])  # members 1 and 2: untouched
        assert not torch.equal(x[0], y[0])  # member 0 stepped
    assert [float(s) for s in adam.steps["w"]] == [6.0, 0.0, 2.0]


def test_a_hundred_stacked_updates_give_each_member_what_it_gets_alone() -> None:
    """Three MADDPG members with their own hyperparameters: 100 updates in one stack leave
    each where 100 updates in a stack of its own leave it (parameters within 1e-5)."""
    stacked_members = members("MADDPG", "box")
    own = [m.clone() for m in stacked_members]
    group = OffPolicyStack(stacked_members)
    for call in range(4):
        batches = [[rows("box", 1000 * k + 25 * call + u) for u in range(25)] for k in range(3)]
        group.learn_batches(batches)
        for k, m in enumerate(own):
            m.learn_batches(batches[k])
    for k, m in enumerate(own):
        assert worst(params(stacked_members[k]), params(m)) < 1e-5
        assert worst(params(stacked_members[k], "target"), params(m, "target")) < 1e-5


def test_more_members_than_the_fused_kernel_takes_step_as_their_own() -> None:
    """Past :data:`~distmarl.algorithms.common.row_adam.FUSED_MEMBERS` members, each with its
    own learning rates, Adam steps in the masked arithmetic: each member ends where its own
    updates (torch's kernel) leave it."""
    from distmarl.algorithms.common.row_adam import FUSED_MEMBERS

    k = FUSED_MEMBERS + 2
    stacked_members = [make("MATD3", "mixed", seed=i, lr_actor=1e-3 * (1 + i / k),
                            lr_critic=2e-3 * (1 + i / (2 * k))) for i in range(k)]
    own = [m.clone() for m in stacked_members]
    batches = [[rows("mixed", 10 * i + u) for u in range(6)] for i in range(k)]
    assert_stacked_as_alone(stacked_members, own, batches)


@pytest.mark.parametrize("algo", ["MADDPG", "MATD3"])
def test_members_with_image_and_dict_observations_stack_as_their_own(algo: str) -> None:
    """CNN and multi-input encoders (run under vmap within their banks), a Discrete and a Box
    agent: three members stacked end where each alone does."""
    from distmarl.algorithms import MATD3
    from tests.algorithms import test_image_offpolicy as images

    cls = MADDPG if algo == "MADDPG" else MATD3
    stacked_members = [cls(images.OBS, images.ACT, images.NET, hp=HP[k], seed=k)
                       for k in range(3)]
    own = [m.clone() for m in stacked_members]
    batches = [[images.batch(16, seed=10 * k + u) for u in range(6)] for k in range(3)]
    assert_stacked_as_alone(stacked_members, own, batches)


def test_a_member_that_was_stacked_with_others_learns_alone_from_where_the_stack_left_it() -> None:
    """A member learns alone (its own stack of one), then in a stack with another, then alone
    again: the stack of one it kept no longer holds its tensors, is built anew, and the member
    ends where three calls alone leave its clone."""
    member, other = members("MADDPG", "box")[:2]
    clone = member.clone()
    calls = [[rows("box", 10 * c + u) for u in range(3)] for c in range(3)]
    member.learn_batches(calls[0])
    OffPolicyStack([member, other]).learn_batches([calls[1], calls[1]])
    member.learn_batches(calls[2])
    for c in calls:
        clone.learn_batches(c)
    assert worst(params(member), params(clone)) < 1e-5
    assert worst(params(member, "target"), params(clone, "target")) < 1e-5
    assert worst(adam_state(member), adam_state(clone)) < 1e-5


def test_an_agent_whose_critics_differ_in_shape_is_named() -> None:
    """A critic bank holds every role of an agent's critics: where they differ in architecture
    (never by the algorithms' own builds and mutations, which change them alike) the stack
    refuses, naming the agent."""
    from distmarl.algorithms.offpolicy.banks import plan_banks

    member = make("MATD3", "box", seed=0)
    grown = make("MATD3", "box", seed=1)
    grown.mutate_architecture("add_node", np.random.default_rng(0))
    nets = {**member.nets.online, "critic_2/speaker_0": grown.nets.online["critic_2/speaker_0"]}
    assert nets["critic_2/speaker_0"].arch != nets["critic/speaker_0"].arch
    with pytest.raises(ValueError, match="the critics of agent 'speaker_0' differ in architecture"):
        plan_banks(nets, AGENTS, member.CRITIC_ROLES)
