"""The batched-members benchmark compares like with like: its vmapped update is the loop's."""

import pytest
import torch

from benchmarks.micro import member_vmap


def test_vmap_update_equals_loop_update_per_member_lr() -> None:
    assert member_vmap.same_update(n=3, batch=16, steps=4) < 1e-5


def test_a_wrong_learning_rate_is_caught() -> None:
    lrs = [1e-3, 2e-3]
    loop = member_vmap.LoopTrainer(member_vmap.make_members(2), lrs)
    vm = member_vmap.VmapTrainer(member_vmap.make_members(2), [1e-3, 3e-3])
    x, y = member_vmap.make_data(2, 16)
    loop.step(x, y)
    vm.step(x, y)
    first = loop.params()[0]
    second = loop.params()[1]
    assert all(((first[k] - vm.member_params(0)[k]).abs() < 1e-6).all() for k in first)
    assert max((second[k] - vm.member_params(1)[k]).abs().max().item() for k in second) > 1e-5


def test_measure_reports_both_rates() -> None:
    (row,) = member_vmap.measure([2], [8], "cpu", seconds=0.05)
    assert row["members"] == 2 and row["batch"] == 8
    assert row["loop_steps_s"] > 0 and row["vmap_steps_s"] > 0
    assert row["ratio"] == pytest.approx(row["vmap_steps_s"] / row["loop_steps_s"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU")
def test_graph_update_equals_vmap_update() -> None:
    assert member_vmap.same_graph_update(n=3, batch=16, steps=4) < 1e-5
