"""The scaling benchmark's pure parts: which points it runs and how it reads them."""

from __future__ import annotations

from benchmarks.system.scaling import Measured, Point, cpu_times, grid, overrides, report


def test_the_grid_adds_gpu_points_only_where_their_learners_fit() -> None:
    assert grid([4, 8], [1, 2], [1.0, 0.25], gpus=0) == [
        Point(4, 1), Point(4, 2), Point(8, 1), Point(8, 2)]
    one = ["1"]
    gpu_points = [p for p in grid([4, 8, 16], [1], [1.0, 0.5, 0.25], gpus=4, per_learner=one)
                  if p.gpu]
    # a member per learner: 1 GPU each fits 4 members on 4 GPUs; 0.5 fits 8; 0.25 fits 16
    assert gpu_points == [Point(4, 1, 1.0, per_learner="1"), Point(4, 1, 0.5, per_learner="1"),
                          Point(8, 1, 0.5, per_learner="1"), Point(4, 1, 0.25, per_learner="1"),
                          Point(8, 1, 0.25, per_learner="1"), Point(16, 1, 0.25, per_learner="1")]
    # auto: one learner per GPU holds the members, so every size fits at 1 GPU each
    auto = [p for p in grid([4, 16], [1], [1.0], gpus=4) if p.gpu]
    assert auto == [Point(4, 1, 1.0), Point(16, 1, 1.0)]
    # a fixed group size above the population's is left out; 4 per learner on 2 GPUs fits 8
    assert grid([2, 8], [1], [1.0], gpus=2, per_learner=["4"]) == [
        Point(8, 1, per_learner="4"), Point(8, 1, 1.0, per_learner="4")]
    assert "resources.num_gpus_per_learner=0.25" in overrides(Point(16, 1, 0.25), 100, [])
    assert "population.members_per_learner=4" in overrides(Point(16, 1, per_learner="4"), 1, [])


def test_speed_up_and_efficiency_are_against_the_one_worker_point() -> None:
    def m(point: Point, steps_per_s: float, util: float, error: str | None = None) -> Measured:
        return Measured(point, int(steps_per_s * 10), 10.0, 5.0, 100, util, None, error)

    rows = report([m(Point(4, 1), 1000, 0.25), m(Point(4, 2), 1800, 0.5),
                   m(Point(4, 4), 0, 0.1, "exit 1"), m(Point(4, 2, nodes=2), 1500, 0.5)],
                  cores=8)
    two = next(r for r in rows if r.strip().startswith("2 ") and "1,800" in r)
    # twice the busy cores for 1.8x the steps: efficiency 0.9
    assert "1.80x" in two and two.rstrip().endswith("0.90")
    assert any("failed: exit 1" in r for r in rows)
    # the 2-node point is measured against the same point on one node
    across = rows[rows.index("4 members, auto per learner, CPU learners, 2 nodes") + 1]
    assert "0.83x" in across


def test_cpu_times_count_up() -> None:
    busy, total = cpu_times()
    assert 0 <= busy <= total
    assert cpu_times()[1] >= total
