"""Which members share a learner process."""

from __future__ import annotations

import pytest

from distmarl.runtime.logic.grouping import learner_groups, members_per_learner


def test_groups_are_in_member_order_and_balanced() -> None:
    assert learner_groups(4, 1) == [[0], [1], [2], [3]]
    assert learner_groups(4, 4) == [[0, 1, 2, 3]]
    assert learner_groups(16, 5) == [list(range(k, k + 4)) for k in range(0, 16, 4)]
    assert learner_groups(7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert learner_groups(3, 8) == [[0, 1, 2]]
    for members in range(1, 20):
        for per in range(1, 20):
            groups = learner_groups(members, per)
            assert [m for g in groups for m in g] == list(range(members))
            sizes = [len(g) for g in groups]
            assert max(sizes) <= per and max(sizes) - min(sizes) <= 1
            assert len(groups) == -(-members // per)
    with pytest.raises(ValueError, match="members per learner"):
        learner_groups(4, 0)


def test_auto_puts_members_on_one_learner_per_gpu_or_core_and_stacks_many_in_process() -> None:
    assert members_per_learner(3, members=16, cluster={}, gpus_per_learner=0) == 3
    assert members_per_learner(32, members=16, cluster=None, gpus_per_learner=0) == 16
    # GPUs that learners ask for: as many learners as the GPUs take at their fraction each
    assert members_per_learner("auto", 16, {"CPU": 16, "GPU": 1}, gpus_per_learner=1) == 16
    assert members_per_learner("auto", 16, {"CPU": 16, "GPU": 3}, gpus_per_learner=1) == 6
    assert members_per_learner("auto", 16, {"CPU": 16, "GPU": 1}, gpus_per_learner=0.25) == 4
    assert members_per_learner("auto", 16, {"CPU": 16, "GPU": 1}, gpus_per_learner=1 / 16) == 1
    assert members_per_learner("auto", 4, {"CPU": 16, "GPU": 2}, gpus_per_learner=0.1) == 1
    # CPU (GPUs learners do not ask for count as none): a learner per core, the members
    # spread over them
    assert members_per_learner("auto", 16, {"CPU": 2, "GPU": 1}, gpus_per_learner=0) == 8
    assert members_per_learner("auto", 8, {"CPU": 2}, gpus_per_learner=1) == 4
    assert members_per_learner("auto", 9, {"CPU": 2}, gpus_per_learner=0) == 5
    assert members_per_learner("auto", 4, {"CPU": 2}, gpus_per_learner=0) == 2
    assert members_per_learner("auto", 3, {"CPU": 2}, gpus_per_learner=0) == 2
    assert members_per_learner("auto", 16, {"CPU": 16}, gpus_per_learner=0) == 1
    assert members_per_learner("auto", 4, {"CPU": 16}, gpus_per_learner=0) == 1
    # in one process: all members in one stack
    assert members_per_learner("auto", 2, None, 0) == 2
    assert members_per_learner("auto", 16, None, 0) == 16
    assert members_per_learner("auto", 1, None, 0) == 1
