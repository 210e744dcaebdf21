"""Shared fixtures: one real local Ray for the tests that need it, a home and one torch thread
for every test; the order of the files under pytest-xdist."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


class _SuiteRay:
    """The real local Ray (2 CPUs) that every test asking for ``ray_local`` shares in this
    process. It is shut down once this process's tests move on to a file that uses no Ray:
    the files that do come first (:func:`pytest_collection_modifyitems`), and an idle Ray's
    processes would otherwise take CPU from the rest of the suite. Should a file using Ray
    still come later, it is started again."""

    def __init__(self) -> None:
        self.files: set[Path] = set()  # the files with a test marked `ray` or using ray_local
        self.running = False

    def start(self) -> None:
        import ray

        from distmarl.runtime.driver.cluster import init_ray

        if not ray.is_initialized():
            init_ray(num_cpus=2, dashboard=False, log_to_driver=False)
        self.running = True

    def stop(self) -> None:
        if self.running:
            import ray

            ray.shutdown()
            self.running = False


SUITE_RAY = _SuiteRay()


@pytest.fixture(scope="session")
def ray_local():
    """The suite's shared local Ray (:class:`_SuiteRay`); yields the ``ray`` module."""
    import ray

    SUITE_RAY.start()
    yield ray
    SUITE_RAY.stop()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before each test: the shared Ray shut down for a file that does not use it, or started
    again for one that does, if it was shut down."""
    if item.path not in SUITE_RAY.files:
        SUITE_RAY.stop()
    elif "ray_local" in item.fixturenames and not SUITE_RAY.running:
        SUITE_RAY.start()


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
    """Under pytest-xdist, the files that use Ray first, then the tests marked ``slow``, then
    the rest (otherwise in collection order): a long test that starts last keeps one worker
    busy after the others have run out of tests, and once a worker's Ray files are done its
    shared Ray is shut down (:class:`_SuiteRay`). Every worker sorts alike, as xdist
    requires."""
    SUITE_RAY.files = {item.path for item in items
                       if item.get_closest_marker("ray") or "ray_local" in item.fixturenames}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: (item.path not in SUITE_RAY.files,
                                     item.get_closest_marker("slow") is None))
