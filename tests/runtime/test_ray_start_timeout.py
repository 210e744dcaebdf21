"""A local Ray that does not start in time (a machine under heavy load: the node does not
register with Ray's GCS within Ray's 30 s) ends ``distmarl train`` with one line naming the
cause and what to do, no traceback, exit 4. The overload is real: Ray's own testing knob
delays the GCS's answer to the raylet's registration past Ray's wait. Ray's wait reads a clock
that runs 6 times as fast in the run's process (its 30 s are 5 s here): the wait itself is Ray's
code, and its length is not the subject."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distmarl.cli import EXIT_RAY_START

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
#: the GCS answers the raylet's registration after 40 s, past Ray's 30 s wait
SLOW_REGISTRATION = {"RAY_testing_asio_delay_us":
                     "NodeInfoGcsService.grpc_server.RegisterNode=40000000:40000000",
                     "RAY_raylet_start_wait_time_s": "1"}
#: ``python -m distmarl ARGS`` with Ray's node module on a clock 6 times as fast (it reads
#: ``time.monotonic`` only to bound its waits for its node)
FAST_WAIT = textwrap.dedent("""
    import runpy, sys, time, types
    import ray._private.node as node

    clock = {name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    node.time = types.SimpleNamespace(**{**clock, "monotonic": lambda: 6 * time.monotonic()})
    sys.argv = ["distmarl", *sys.argv[1:]]
    runpy.run_module("distmarl", run_name="__main__", alter_sys=True)
""")


@pytest.mark.slow
def test_a_ray_that_does_not_start_in_time_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, **SLOW_REGISTRATION}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", FAST_WAIT, "train", str(TINY), "--no-mlflow", "--quiet",
         "--num-cpus", "1", "--no-dashboard", "--set", f"tracking.directory={tmp_path / 'runs'}"],
        capture_output=True, text=True, timeout=150, env=env, cwd=tmp_path)
    assert done.returncode == EXIT_RAY_START == 4, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "RAY_testing_asio" not in line]
    assert lines == ["distmarl: the local Ray did not start in time: its node did not register "
                    "with Ray's GCS within Ray's 30 s (the machine is overloaded, or a Ray "
                    "process failed to start); retry when the load is lower, or join a running "
                    "Ray with --address (`ray start --head` first)"], done.stderr
    assert done.stdout == ""
    assert not any((tmp_path / "runs").iterdir())  # no empty run directory left behind
