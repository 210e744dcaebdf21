"""Shared fixtures: one real local Ray for every test that needs it (started once per run)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")

#: the user's home, kept out of the tests' reach: a local Ray writes its token to
#: ``$HOME/.ray/auth_token``, matplotlib and distmarl their caches under ``$HOME``, so this
#: process and every process a test starts see an empty home of their own, removed at exit
USER_HOME = os.environ.get("HOME")
TEST_HOME = tempfile.mkdtemp(prefix="distmarl-tests-home-")
os.environ["HOME"] = TEST_HOME
os.environ["XDG_CACHE_HOME"] = os.path.join(TEST_HOME, ".cache")  # MLflow's blank store
atexit.register(shutil.rmtree, TEST_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs, shared by every `ray`-marked test of the run."""
    import ray

    from distmarl.runtime.driver.cluster import init_ray

    init_ray(num_cpus=2, dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Single-threaded torch in every test: on a shared 2-core machine extra intra-op threads
    make each small matmul many times slower (the actors set the same)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the tests marked ``slow`` first (otherwise in collection order): a
    long test that starts last keeps one worker busy after the others have run out of tests.
    Every worker sorts alike, as xdist requires."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
