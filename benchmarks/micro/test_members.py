"""Members updated one after another, against the same members updated as one stacked
computation: critic steps (:mod:`benchmarks.micro.member_vmap`) and whole MADDPG updates
(:mod:`benchmarks.micro.member_groups`), 8 members on CPU."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.micro.member_groups import members_and_batches
from benchmarks.micro.member_vmap import LoopTrainer, VmapTrainer, make_data, make_members

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark: the bench extra")

MEMBERS = 8


@pytest.mark.benchmark(group="members: 8 critic steps, batch 256")
@pytest.mark.parametrize("trainer", [LoopTrainer, VmapTrainer], ids=["loop", "vmap"])
def test_critic_steps(benchmark: Any, trainer: type) -> None:
    step = trainer(make_members(MEMBERS), [1e-3] * MEMBERS)
    x, y = make_data(MEMBERS, 256)
    benchmark(step.step, x, y)


@pytest.mark.benchmark(group="members: 8 MADDPG updates, batch 256")
@pytest.mark.parametrize("way", ["own", "stacked"])
def test_maddpg_updates(benchmark: Any, way: str) -> None:
    from distmarl.algorithms.groups import OffPolicyStack

    members, data = members_and_batches(range(MEMBERS), 256, 1, "cpu")
    if way == "own":
        def update() -> None:
            for member, batches in zip(members, data):
                member.learn_batches(batches)
    else:
        group = OffPolicyStack(members)

        def update() -> None:
            group.learn_batches(data)
    update()  # warm-up: the first Adam step's state
    benchmark(update)
