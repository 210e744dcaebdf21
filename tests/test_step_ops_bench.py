"""A stack's step dispatches as many torch operations for 64 members as for 16, and no more
for 1 (``benchmarks.micro.step_ops``): its host work does not grow with its members, even
where every member has its own learning rate."""

from __future__ import annotations

from benchmarks.micro.step_ops import offpolicy_step_ops, onpolicy_step_ops


def test_an_off_policy_step_dispatches_as_many_operations_for_any_number_of_members() -> None:
    one, many, more = (offpolicy_step_ops(k, batch=16) for k in (1, 16, 64))
    assert many == more
    assert one["step"] <= many["step"] and one["prepare"] <= many["prepare"]


def test_an_on_policy_step_dispatches_as_many_operations_for_any_number_of_members() -> None:
    one, many, more = (onpolicy_step_ops(k) for k in (1, 16, 64))
    assert many == more
    assert one["step"] <= many["step"]
