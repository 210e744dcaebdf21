"""Env steps of mpe2 simple_spread: the vector env (:mod:`benchmarks.micro.env_bench`'s
``VectorLoop``, batched pre-drawn actions) against the plain loop over one env. A call makes
about 200 env steps (``extra_info["env_steps"]`` says how many), so times compare per env
step."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.micro.env_bench import PlainLoop, VectorLoop

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark: the bench extra")

SPEC = "mpe2:simple_spread_v3"
KWARGS = {"max_cycles": 25, "continuous_actions": False}


@pytest.mark.benchmark(group="env: about 200 env steps")
def test_plain_loop(benchmark: Any) -> None:
    loop = PlainLoop(SPEC, KWARGS)
    try:
        benchmark.extra_info["env_steps"] = benchmark(lambda: loop.run() + loop.run())
    finally:
        loop.close()


@pytest.mark.benchmark(group="env: about 200 env steps")
@pytest.mark.parametrize("num_envs", [8, 32])
def test_sync_vector_env(benchmark: Any, num_envs: int) -> None:
    loop = VectorLoop(SPEC, KWARGS, "sync", num_envs)
    try:
        benchmark.extra_info["env_steps"] = benchmark(loop.run)
    finally:
        loop.close()
