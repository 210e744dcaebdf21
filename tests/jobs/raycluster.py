"""A real Ray cluster on this machine, run from subprocesses only (`ray start`), for job tests.

Never `ray stop`: it kills every Ray on the machine, including the test session's own
(`ray_local`) and other people's. Each node is started in its own session (setsid) with its own
temp dir, and teardown kills exactly those processes: the node's session, anything whose command
line or working directory is under the node's temp dir (job drivers run from a working dir
unpacked there). Every port Ray would otherwise take at a fixed default (GCS 6379, dashboard
8265, client server 10001, dashboard agent 52365) is a free one picked here; the dashboard and
job server listen on 127.0.0.1 only. Token authentication is on, with a token file of its own;
``env(token=...)`` gives clients that find it in each of the places Ray looks, or nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
RAY = VENV_BIN / "ray"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int, taken: set[int] | None = None) -> list[int]:
    """``n`` distinct free ports, none in ``taken`` (which gains them).

    All sockets stay bound until every port is picked: one bound and closed at a time, the
    kernel may hand the same port out twice, and Ray refuses to start when two of its
    components are given the same port."""
    taken = set() if taken is None else taken
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < n:
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("0.0.0.0", 0))
            port = s.getsockname()[1]
            if port not in taken:
                ports.append(port)
    taken.update(ports)
    return ports


def _proc_field(pid: int, name: str) -> str:
    try:
        if name == "cmdline":
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if name == "cwd":
            return os.readlink(f"/proc/{pid}/cwd")
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return {"state": fields[0], "sid": fields[3]}[name]
    except (OSError, ValueError):
        return ""


@dataclass
class Node:
    temp_dir: Path
    sid: int  # the session of the `ray start` that made the node: all its daemons share it
    log: Path


@dataclass
class LocalRayCluster:
    """``start_head()`` then ``add_node()`` (which waits for the job server) or
    ``wait_for_job_server()``; ``shutdown()`` always (a fixture does)."""

    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dmr", dir="/tmp")))
    nodes: list[Node] = field(default_factory=list)
    gcs_port: int = 0
    dashboard_port: int = 0
    #: more environment for every node and client (e.g. ``RAY_health_check_period_ms``)
    extra_env: dict[str, str] = field(default_factory=dict)
    #: every port handed to a node so far: no two components of the cluster share one
    ports_taken: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        # short paths: Ray's unix sockets live under the temp dir (108-byte limit)
        self.token_file = self.base / "token"
        self.token_file.write_text(secrets.token_hex(32))
        self.token_file.chmod(0o600)
        (self.base / "empty-home").mkdir()
        (self.base / "home" / ".ray").mkdir(parents=True)
        shutil.copy(self.token_file, self.base / "home" / ".ray" / "auth_token")

    @property
    def address(self) -> str:
        """The job server (the dashboard)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def env(self, token: str = "path") -> dict[str, str]:
        """The environment of every process that talks to this cluster: the venv's `python` /
        `distmarl` first on PATH (job entrypoints run `python -m distmarl.cli`), no stray
        addresses or MLflow settings from the outer shell, and the token where ``token`` says:

        - ``"path"``: ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` (the nodes' own way);
        - ``"home"``: only in ``$HOME/.ray/auth_token``, Ray's default file, ``RAY_AUTH_MODE``
          unset: a client on a machine where ``ray get-auth-token --generate`` ran;
        - ``"env"``: only in ``RAY_AUTH_TOKEN``, ``RAY_AUTH_MODE`` unset;
        - ``"none"``: nowhere (an empty ``$HOME``), ``RAY_AUTH_MODE`` unset.

        Ray reads ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` before ``$HOME/.ray``, and the
        other cases get a ``$HOME`` of this cluster's, so no client reads the user's own token.
        """
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("RAY_", "MLFLOW_")) and k != "VIRTUAL_ENV"}
        env.update(PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
                   RAY_DEDUP_LOGS="0", PYTHONUNBUFFERED="1",
                   # a busy 2-core machine can take more than Ray's default to register a node
                   RAY_raylet_start_wait_time_s="180")
        if token == "path":
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_file))
        elif token in ("home", "env", "none"):
            env["HOME"] = str(self.base / ("home" if token == "home" else "empty-home"))
            if token == "env":
                env["RAY_AUTH_TOKEN"] = self.token_file.read_text()
        else:
            raise ValueError(f"token={token!r}: one of 'path', 'home', 'env', 'none'")
        env.update(self.extra_env)
        return env

    def _start(self, args: list[str], name: str, timeout_s: float = 120) -> None:
        temp_dir = self.base / name
        temp_dir.mkdir()
        log = self.base / f"{name}.log"
        agent_http, agent_grpc, runtime_env, metrics = free_ports(4, self.ports_taken)
        common = ["--temp-dir", str(temp_dir), "--disable-usage-stats",
                  "--object-store-memory", str(200 * 1024 * 1024),
                  "--dashboard-agent-listen-port", str(agent_http),
                  "--dashboard-agent-grpc-port", str(agent_grpc),
                  "--runtime-env-agent-port", str(runtime_env),
                  "--metrics-export-port", str(metrics)]
        with open(log, "w") as fh:
            proc = subprocess.Popen([str(RAY), "start", *args, *common], stdout=fh,
                                    stderr=subprocess.STDOUT, env=self.env(), cwd=self.base,
                                    start_new_session=True)
        self.nodes.append(Node(temp_dir, proc.pid, log))
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = -1
        if rc != 0:
            raise RuntimeError(f"`ray start` ({name}) exited {rc}:\n{log.read_text()[-3000:]}")

    @property
    def gcs_address(self) -> str:
        """What ``ray.init(address=...)`` / ``distmarl train --address`` take."""
        return f"127.0.0.1:{self.gcs_port}"

    def start_head(self, num_cpus: int) -> LocalRayCluster:
        self.gcs_port, self.dashboard_port, client = free_ports(3, self.ports_taken)
        self._start(["--head", "--port", str(self.gcs_port), "--num-cpus", str(num_cpus),
                     "--dashboard-host", "127.0.0.1", "--dashboard-port", str(self.dashboard_port),
                     "--ray-client-server-port", str(client)], "head")
        return self

    def add_node(self, num_cpus: int) -> LocalRayCluster:
        """Another node; returns once the job server is up (the head's dashboard starts
        meanwhile) and the node is alive."""
        self._start(["--address", self.gcs_address, "--num-cpus", str(num_cpus)],
                    f"node{len(self.nodes)}")
        self.wait_for_job_server()
        self.wait_for_nodes(len(self.nodes))
        return self

    def node_processes(self, index: int) -> list[int]:
        """Live processes of node ``index`` only (0: the head): its session, or its temp dir in
        their command line or working directory."""
        node = self.nodes[index]
        return [pid for pid in self.processes()
                if _proc_field(pid, "sid") == str(node.sid)
                or str(node.temp_dir) in _proc_field(pid, "cmdline")
                or _proc_field(pid, "cwd").startswith(str(node.temp_dir))]

    def kill_node(self, index: int) -> list[int]:
        """SIGKILL every process of node ``index`` at once (the machine is gone); returns them.

        All are stopped (SIGSTOP) before any is killed: killed one by one, a raylet still
        running would see its workers die first and report them, and Ray would restart their
        actors once for that and once more when the node is declared dead."""
        pids = self.node_processes(index)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        return pids

    def wait_for_job_server(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                req = urllib.request.Request(
                    f"{self.address}/api/version",
                    headers={"Authorization": f"Bearer {self.token_file.read_text()}"})
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no job server at {self.address} after {timeout_s} s")
            time.sleep(0.5)

    def _get(self, path: str, timeout: float = 10) -> object:
        """JSON from the dashboard's REST API (token sent): a query that starts no process."""
        req = urllib.request.Request(
            f"{self.address}{path}",
            headers={"Authorization": f"Bearer {self.token_file.read_text()}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def job_status(self, submission_id: str) -> str | None:
        """A job's status (None: no such job yet)."""
        try:
            reply = self._get(f"/api/jobs/{submission_id}")
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise
        assert isinstance(reply, dict)
        return str(reply["status"])

    def state(self, what: str) -> str:
        """JSON rows of the state API (alive and dead entries, in detail): ``nodes``,
        ``actors``."""
        reply = self._get(f"/api/v0/{what}?limit=10000&detail=true", timeout=60)
        assert isinstance(reply, dict) and reply["result"], reply
        return json.dumps(reply["data"]["result"]["result"])

    def alive_actors(self) -> list[str]:
        """``class name@node id (job id)`` of every live actor."""
        return [f"{a['class_name']}@{str(a['node_id'])[:8]} (job {a.get('job_id')})"
                for a in json.loads(self.state("actors")) if a["state"] == "ALIVE"]

    def wait_for_no_actors(self, timeout_s: float) -> list[str]:
        """Wait until no actor is alive; those still alive after ``timeout_s``
        (:meth:`alive_actors`)."""
        deadline = time.monotonic() + timeout_s
        while (left := self.alive_actors()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def wait_for_nodes(self, n: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while sum(1 for node in json.loads(self.state("nodes")) if node["state"] == "ALIVE") < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {n} nodes alive after {timeout_s} s")
            time.sleep(1)

    # ------------------------------------------------------------------------------ teardown
    def processes(self) -> list[int]:
        """Live (not zombie) processes of this cluster, found as the module docstring says."""
        sids = {str(n.sid) for n in self.nodes}
        base = str(self.base)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            pid = int(entry.name)
            state = _proc_field(pid, "state")
            if not state or state == "Z":
                continue
            if (_proc_field(pid, "sid") in sids or base in _proc_field(pid, "cmdline")
                    or _proc_field(pid, "cwd").startswith(base)):
                found.append(pid)
        return found

    def shutdown(self, grace_s: float = 4.0) -> list[int]:
        """SIGTERM every process of the cluster, SIGKILL what is left after ``grace_s``; returns
        the pids still alive afterwards (expected: none)."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            pids = self.processes()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while pids and time.monotonic() < deadline:
                time.sleep(0.2)
                pids = self.processes()
            if not pids:
                break
        left = self.processes()
        if not left:
            shutil.rmtree(self.base, ignore_errors=True)
        return left

    def logs(self) -> str:
        """The tail of every node's `ray start` output and raylet log, for failure messages."""
        parts = []
        for node in self.nodes:
            parts.append(node.log.read_text()[-1500:] if node.log.exists() else "")
            for raylet in node.temp_dir.glob("session_*/logs/raylet.out"):
                parts.append(raylet.read_text()[-1500:])
        return "\n".join(parts)
