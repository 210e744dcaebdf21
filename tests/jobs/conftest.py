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

#: the cluster's nodes start with these: the GCS declares a node dead after ~3 missed 1 s
#: health checks (default: 5 of 3 s); no idle workers started for a driver's first connection
#: (a job's actors, with the job's runtime env, could not use them anyway)
CLUSTER_ENV = {"RAY_health_check_period_ms": "1000",
               "RAY_health_check_failure_threshold": "3",
               "RAY_health_check_initial_delay_ms": "1000",
               "RAY_prestart_worker_first_driver": "0"}


@pytest.fixture(scope="package")
def cluster():
    """Head plus a second node on this machine, 3 logical CPUs each (what the node-loss test
    needs to place a run's actors on the second node), with :data:`CLUSTER_ENV`."""
    c = LocalRayCluster(extra_env=dict(CLUSTER_ENV))
    try:
        c.start_head(num_cpus=3)
        c.add_node(num_cpus=3)
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
