"""Shared fixtures: one real local Ray for every test that needs it (started once per run)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs, shared by every `ray`-marked test of the run."""
    import ray

    from distmarl.runtime.cluster import init_ray

    init_ray(num_cpus=2, dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
