"""One learner update of MADDPG and MATD3 with speaker-listener's shapes on CPU
(:mod:`benchmarks.micro.learner_speed`)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.micro.learner_speed import ACT, NET_CONFIG, OBS, make_batch
from distmarl.algorithms import MADDPG, MATD3

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark: the bench extra")


@pytest.mark.benchmark(group="learner: one update")
@pytest.mark.parametrize("batch", [64, 1024])
@pytest.mark.parametrize("cls", [MADDPG, MATD3], ids=["MADDPG", "MATD3"])
def test_update(benchmark: Any, cls: type, batch: int) -> None:
    algo = cls(OBS, ACT, NET_CONFIG, device="cpu", seed=0)
    data = make_batch(batch)
    for _ in range(3):  # warm-up: the first Adam step's state
        algo.learn(data)
    benchmark(algo.learn, data)
