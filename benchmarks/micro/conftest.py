"""The micro benchmarks as pytest-benchmark tests: ``pytest benchmarks/micro`` (the default
test run, ``testpaths = ["tests"]``, leaves them out). Each test times one call of a component
the ``python -m benchmarks.micro.NAME`` scripts measure, with their shapes; pytest-benchmark
calibrates the rounds and reports min / mean / spread per test, and ``--benchmark-compare``
compares with a saved run (``--benchmark-autosave``). Without pytest-benchmark (the ``bench``
extra) the tests are skipped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One torch thread, as distmarl's learners run: small tensor ops, no thread-pool
    stalls, and rates comparable between machines with different core counts."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
