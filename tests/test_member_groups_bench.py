"""The member-groups benchmark runs both ways on the main job's algorithm and spaces."""

import pytest

from benchmarks.micro import member_groups


def test_rate_reports_both_ways_over_all_members() -> None:
    row = member_groups.rate(n=2, batch=16, updates=2, calls=1, device="cpu")
    assert row["members"] == 2 and row["batch"] == 16
    assert row["own_updates_s"] > 0 and row["stacked_updates_s"] > 0
    assert row["ratio"] == pytest.approx(row["stacked_updates_s"] / row["own_updates_s"])


def test_rate_on_policy_reports_both_ways_over_all_members() -> None:
    row = member_groups.rate_on_policy(2, calls=1, device="cpu", sets=[
        "algorithm.hp.learn_step=8", "env.num_envs=2", "algorithm.hp.batch_size=16"])
    assert row["members"] == 2 and row["algorithm"] == "MAPPO"
    assert row["own_updates_s"] > 0 and row["stacked_updates_s"] > 0
