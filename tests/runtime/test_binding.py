"""Safe defaults: the Ray that distmarl starts listens on loopback only.

The Ray is started in a subprocess through :func:`distmarl.runtime.driver.cluster.init_ray` (dashboard
on, one actor running); that process then lists the listening TCP sockets of itself and of every
process it started (GCS, raylet with its object manager, dashboard, dashboard and runtime-env
agents, workers, the actor). ``loopback_only=False`` (Ray's own default) is run too, to show the
check sees wildcard listeners when there are some.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import json, os, sys, time
    import ray
    import psutil  # Ray ships it (ray/thirdparty_files, on sys.path once ray is imported)
    from distmarl.runtime.driver.cluster import init_ray

    init_ray(num_cpus=1, dashboard=True, log_to_driver=False, loopback_only=sys.argv[1] == "1")

    @ray.remote(num_cpus=0)
    class Probe:
        def pid(self):
            return os.getpid()

    probe = Probe.remote()  # kept referenced: the actor lives until shutdown
    actor_pid = ray.get(probe.pid.remote())

    def listeners():
        me = psutil.Process()
        found = set()
        for proc in [me, *me.children(recursive=True)]:
            try:
                cmd = " ".join(proc.cmdline())
                conns = proc.net_connections(kind="inet")
            except psutil.Error:
                continue
            name = proc.name()  # gcs_server, raylet
            if cmd.startswith("ray::"):
                name = cmd.split()[0]
            elif name.startswith("python"):  # the script: dashboard.py, monitor.py, ...
                name = os.path.basename(next((w for w in cmd.split() if w.endswith(".py")), name))
            if proc.pid == actor_pid:
                name = "actor"
            for c in conns:
                if c.status == psutil.CONN_LISTEN:
                    found.add((name, c.laddr.ip, c.laddr.port))
        return found

    # until every server is up (the agents come last) and nothing changed for 2 s
    seen, stable = set(), 0
    deadline = time.monotonic() + 60
    while stable < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
        now = listeners()
        up = set(sys.argv[2].split(",")) <= {name for name, _, _ in now}
        stable = stable + 1 if now == seen and up else 0
        seen = now
    print("LISTEN " + json.dumps(sorted(seen)))
    ray.shutdown()
""")


#: every server a local Ray starts (the raylet twice: node manager, object manager), and the actor
SERVERS = ("gcs_server", "raylet", "dashboard.py", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
           "actor")


def listening(loopback_only: bool) -> list[tuple[str, str, int]]:
    """``(process, ip, port)`` of every listening socket of a Ray started by ``init_ray``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    proc = subprocess.run([sys.executable, "-c", PROBE, "1" if loopback_only else "0",
                           ",".join(SERVERS)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=150)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LISTEN ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    return [tuple(x) for x in json.loads(line.removeprefix("LISTEN "))]


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return addr.is_loopback or bool(mapped and mapped.is_loopback)


def test_a_local_ray_listens_on_loopback_only() -> None:
    found = listening(loopback_only=True)
    names = {name for name, _, _ in found}
    for expected in SERVERS:
        assert expected in names, (expected, found)
    assert sum(name == "raylet" for name, _, _ in found) >= 2  # node manager, object manager
    wide = [x for x in found if not is_loopback(x[1])]
    assert wide == [], f"listening beyond loopback: {wide}"


def network_address() -> str | None:
    """This machine's address towards the network, as Ray finds it (None: loopback only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("8.8.8.8", 80))  # UDP: sends nothing, only picks the outgoing interface
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if is_loopback(ip) else ip


def test_without_loopback_only_ray_listens_on_every_interface() -> None:
    """Ray's own default, shown so that the check above is known to catch wildcard binds."""
    if network_address() is None:
        pytest.skip("this machine has no network address besides loopback")
    found = listening(loopback_only=False)
    wide = {name for name, ip, _ in found if not is_loopback(ip)}
    assert {"gcs_server", "raylet"} <= wide, found
    dashboard = [ip for name, ip, port in found if name == "dashboard.py" and port == 8265]
    assert all(is_loopback(ip) for ip in dashboard), found  # dashboard_host stays 127.0.0.1


def test_loopback_node_leaves_ray_as_it_was() -> None:
    from ray._private import ray_constants

    from distmarl.runtime.driver.cluster import loopback_node

    before = ray_constants.ENABLE_RAY_CLUSTER
    with pytest.raises(RuntimeError), loopback_node():
        assert ray_constants.ENABLE_RAY_CLUSTER is False
        raise RuntimeError("ray.init failed")
    assert before == ray_constants.ENABLE_RAY_CLUSTER
