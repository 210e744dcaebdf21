"""The fleets' verbs between the calls, on tiny.yaml's two members, in process and on a real
local Ray: a copy step swaps full states and publishes nothing (the evolution step publishes
every member it changed once), a learner Ray restarted is seen in its publish reply and
restored, and the records' policies act with a member's published weights."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from distmarl.collect.cancel import NEVER
from distmarl.config import load_config
from distmarl.factory import env_spaces, make_algorithm
from distmarl.hpo.strategies import Step
from distmarl.runtime.actors.clients import LocalStore
from distmarl.runtime.actors.learner import TrainResult
from distmarl.runtime.logic.run_state import MemberState, RunState
from distmarl.runtime.records.policies import PublishedPolicies
from tests.fakes import tensors

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


class Built:
    """tiny.yaml's fleet (in process where ``local``, else on Ray; one learner per member),
    its run state with published weights, and the config."""

    def __init__(self, local: bool) -> None:
        from distmarl.runtime.coordinator.run import fleet_spec, make_fleet
        from distmarl.runtime.logic.datapath import make_datapath
        from distmarl.runtime.logic.scheduler import Scheduler

        self.cfg = cfg = load_config(TINY, ["population.members_per_learner=1"])
        self.spaces = env_spaces(cfg.env)
        self.state = RunState()
        path = make_datapath(cfg.algorithm.name, cfg.training)
        scheduler = Scheduler(path, self.state, 1, cfg.env.num_envs)
        self.fleet: Any = make_fleet(fleet_spec(cfg, self.spaces, None), local, path,
                                     self.state, scheduler, NEVER)
        self.state.members = [MemberState(i, 200, hp, algorithm="MADDPG")
                              for i, hp in enumerate(self.fleet.hyperparameters())]
        self.fleet.watch()

    def networks(self) -> list[dict[str, torch.Tensor]]:
        """Every learner's networks (online, targets, optimisers), copied."""
        return [{k: v.clone() for k, v in tensors(s["algo"]["networks"])}
                for s in self.fleet.learner_states()]

    def published(self, member: int) -> dict[str, Any]:
        """The weights ``member`` published last."""
        return self.fleet.store.get(self.state.members[member].weights_box[0])


@pytest.fixture(params=[True, pytest.param(False, marks=[pytest.mark.ray, pytest.mark.slow])],
                ids=["local", "ray"])
def built(request: pytest.FixtureRequest) -> Iterator[Built]:
    if not request.param:
        request.getfixturevalue("ray_local")
    b = Built(request.param)
    yield b
    b.fleet.close()
    if not request.param:
        import ray

        for actor in b.fleet.actors():
            ray.kill(actor)


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_swap_copies_full_states_and_publishes_nothing(built: Built) -> None:
    before = built.networks()
    assert not same(before[0], before[1])  # members start from their own seeds
    versions = [m.version for m in built.state.members]
    copied, mutated = built.fleet.carry_out([(0, 1), (1, 0)], [])
    assert [(c.member, c.source) for c in copied] == [(0, 1), (1, 0)] and mutated == []
    after = built.networks()
    assert same(after[0], before[1]) and same(after[1], before[0])
    assert [m.version for m in built.state.members] == versions


def test_an_evolution_step_publishes_each_member_it_changed_once(built: Built) -> None:
    """A copy into member 0 and hyperparameters from member 1 on it too: member 0's weights
    published once, after both; member 1, unchanged, not at all."""
    from distmarl.hpo.strategies import make_strategy
    from distmarl.runtime.coordinator.generations import Generations, make_hp_config
    from distmarl.runtime.hooks.base import CooperativeHooks

    cfg, state = built.cfg, built.state
    hp_config = make_hp_config(cfg.evolution.hp_config, ["MADDPG"])
    generations = Generations(cfg.evolution, cfg.training, 0, built.fleet, state, hp_config,
                              make_strategy(cfg.evolution, 2, hp_config, None),
                              CooperativeHooks(built.fleet, cfg.evolution))
    state.members[1].hp["lr_actor"] = 0.005
    built.fleet.set_hyperparameters({1: {"lr_actor": 0.005}})
    versions = [m.version for m in state.members]
    generations.apply(Step(copies=((0, 1),), hp_from=((0, 1),)))
    assert [m.version for m in state.members] == [versions[0] + 1, versions[1]]
    assert state.members[0].hp["lr_actor"] == 0.005
    np.testing.assert_equal(built.published(0)["params"], built.published(1)["params"])


@pytest.mark.ray
@pytest.mark.slow
def test_a_restarted_learner_is_seen_in_its_publish_reply_and_restored(ray_local: Any) -> None:
    """Member 1's learner process killed: publishing sees its new incarnation in the reply,
    restores it from its snapshot (taken as the fleet started) and publishes that state; a
    reply of the killed incarnation coming later (a train result sent before the kill) is
    dropped without counting the restart again."""
    import os
    import signal
    import time

    built = Built(local=False)
    try:
        fleet = built.fleet
        started = built.published(1)["params"]
        killed = fleet.learner_incarnations[1]
        os.kill(ray_local.get(fleet.learners[1].info.remote())["pid"], signal.SIGKILL)
        time.sleep(1.0)
        fleet.publish([0, 1])
        assert fleet.faults.learner_restarts == 1
        assert [e["member"] for e in built.state.events
                if e.get("fault") == "learner restarted"] == [1]
        np.testing.assert_equal(built.published(1)["params"], started)
        assert fleet.learner_incarnations[1] != killed
        late = TrainResult(4, {}, 0.0, None, killed)  # what the killed one learned, reported late
        assert fleet.trained(1, late) is False and fleet.faults.learner_restarts == 1
    finally:
        for actor in built.fleet.actors():
            ray_local.kill(actor)


def test_a_published_policy_acts_with_the_members_actors_alone() -> None:
    """The records' policy of a member: its published actors, greedy actions equal to the
    learner's; none of the learner's critics."""
    cfg = load_config(TINY)
    spaces = env_spaces(cfg.env)
    learner = make_algorithm(cfg.algorithm, spaces, seed=3)
    store = LocalStore()
    state = RunState()
    state.members = [MemberState(0, 200, {}), MemberState(1, 200, {})]
    state.members[0].set_weights(1, [store.put(learner.get_weights())])
    policies = PublishedPolicies(state, store,
                                 lambda name: make_algorithm(cfg.algorithm, spaces, seed=5))
    policy = policies(0)
    rng = np.random.default_rng(0)
    obs = {a: rng.standard_normal((4, *s.shape)).astype(np.float32)
           for a, s in spaces.observation.items()}
    for a, action in learner.act(obs, explore=False).items():
        np.testing.assert_array_equal(policy.act(obs, explore=False)[a], action)
    mine = dict(tensors(learner.state_dict()["networks"]["online"]))
    theirs = dict(tensors(policy.state_dict()["networks"]["online"]))
    critics = [k for k in mine if "critic" in k]
    assert critics and not any(torch.equal(mine[k], theirs[k]) for k in critics)
    with pytest.raises(RuntimeError, match="member 1 has published no weights yet"):
        policies(1)


@pytest.mark.ray
@pytest.mark.slow
def test_a_copy_from_a_learner_that_restarted_unseen_copies_its_restored_state(
        ray_local: Any) -> None:
    """Member 1, holding member 0's first state (a copy, snapshot), then its learner killed
    while idle (no call of the fleet's saw it): the copy step into member 0 sees the restart,
    restores member 1 from its snapshot and copies that state, not the fresh one (member 1's
    own first state) the restarted learner began with."""
    import os
    import signal
    import time

    built = Built(local=False)
    try:
        fleet = built.fleet
        first = built.networks()
        fleet.carry_out([(1, 0)], [])
        fleet.publish([1], snapshot=True)
        before = built.networks()
        assert same(before[1], first[0]) and not same(before[1], first[1])
        time.sleep(1.0)  # the snapshot taken
        os.kill(ray_local.get(fleet.learners[1].info.remote())["pid"], signal.SIGKILL)
        time.sleep(1.0)
        fleet.carry_out([(0, 1)], [])
        assert fleet.faults.learner_restarts == 1
        assert [e["members"] for e in built.state.events
                if e.get("fault") == "copy step redone"] == [[0]]
        after = built.networks()
        assert same(after[1], before[1]) and same(after[0], before[1])
    finally:
        for actor in built.fleet.actors():
            ray_local.kill(actor)
