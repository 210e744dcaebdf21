"""A local Ray that does not start in time (a machine under heavy load: the node does not
register with Ray's GCS within Ray's 30 s) ends ``distmarl train`` with one line naming the
cause and what to do, no traceback, exit 4. The overload is real: Ray's own testing knob
delays the GCS's answer to the raylet's registration past Ray's wait."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distmarl.cli import EXIT_RAY_START

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
#: the GCS answers the raylet's registration after 40 s, past Ray's 30 s wait
SLOW_REGISTRATION = {"RAY_testing_asio_delay_us":
                     "NodeInfoGcsService.grpc_server.RegisterNode=40000000:40000000",
                     "RAY_raylet_start_wait_time_s": "1"}


@pytest.mark.slow  # mostly Ray's wait: it runs beside other tests, first (not with the Ray part)
def test_a_ray_that_does_not_start_in_time_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, **SLOW_REGISTRATION}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "distmarl", "train", str(TINY), "--no-mlflow", "--quiet",
         "--num-cpus", "1", "--set", f"tracking.directory={tmp_path / 'runs'}"],
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
