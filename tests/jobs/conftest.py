"""One real two-node Ray cluster for the job tests, started from subprocesses and always torn down.

The pytest process never calls ``ray.init`` for it (the session's own ``ray_local`` may be
running in this process); everything that talks to the cluster is a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.raycluster import ROOT, LocalRayCluster


@pytest.fixture(scope="package")
def cluster():
    """Head (1 CPU) plus a second node (1 CPU) on this machine: 2 CPUs, as a 2-core box allows."""
    c = LocalRayCluster()
    try:
        c.start_head(num_cpus=1)
        c.add_node(num_cpus=1)
        yield c
    finally:
        left = c.shutdown()
        assert left == [], f"Ray processes survived teardown: {left}"


def run_cli(cluster: LocalRayCluster, *args: str, env: dict[str, str] | None = None,
            timeout: float = 240, cwd: Path = ROOT, token: str = "path") -> subprocess.CompletedProcess:
    """``distmarl ARGS`` in a subprocess pointed at ``cluster`` (PATH, the token where
    ``token`` says: see ``LocalRayCluster.env``)."""
    return subprocess.run([sys.executable, "-m", "distmarl.cli", *args],
                          env={**cluster.env(token), **(env or {})}, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def run_clis(cluster: LocalRayCluster, *calls: tuple[tuple[str, ...], dict[str, Any]]
             ) -> list[subprocess.CompletedProcess]:
    """:func:`run_cli` of each ``(args, keywords)`` at once (each client is a process of its
    own, most of its time spent starting up); the results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(run_cli, cluster, *args, **kw) for args, kw in calls]
        return [f.result() for f in futures]
