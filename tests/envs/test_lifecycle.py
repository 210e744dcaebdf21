"""Crashes, close, Ctrl-C and garbage collection: clear errors and no process left behind."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from distmarl.envs import ClosedEnvError, SubEnvError, VectorParallelEnv
from tests.envs.toy_envs import CrashEnv, DyingEnv, failing_factory

REPO = Path(__file__).resolve().parents[2]
FOREVER = (10**9,) * 2  # DyingEnv deaths: nobody dies


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to a signal-0 probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def all_gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def worker_children() -> list:
    return [p for p in mp.active_children() if p.name.startswith("distmarl-env-worker")]


def zeros(venv: VectorParallelEnv) -> dict[str, np.ndarray]:
    return {a: np.zeros(venv.num_envs, dtype=np.int64) for a in venv.agents}


def crash_fns(how: str) -> list:
    ok = partial(CrashEnv, crash_at=10**9)
    return [ok, ok, partial(CrashEnv, crash_at=2, how=how), ok]


def test_crash_in_a_worker_names_the_subenv_and_stops_every_worker() -> None:
    venv = VectorParallelEnv(crash_fns("raise"), mode="async", num_workers=2)
    pids = venv.worker_pids
    assert len(pids) == 2 and all(alive(p) for p in pids)
    venv.reset(seed=0)
    venv.step(zeros(venv))
    with pytest.raises(SubEnvError, match=r"sub-env 2 .*raised RuntimeError: boom at step 2") as e:
        venv.step(zeros(venv))
    assert e.value.env_index == 2 and e.value.worker == 1 and e.value.exc_type == "RuntimeError"
    assert "toy_envs.py" in e.value.remote_traceback  # where it happened, from the sub-process
    assert venv.closed and all_gone(pids)
    with pytest.raises(ClosedEnvError):
        venv.step(zeros(venv))
    venv.close()  # idempotent


def test_crash_in_sync_mode_chains_the_original_exception() -> None:
    venv = VectorParallelEnv(crash_fns("raise"), mode="sync")
    venv.reset()
    venv.step(zeros(venv))
    with pytest.raises(SubEnvError, match="sub-env 2 raised RuntimeError: boom") as e:
        venv.step(zeros(venv))
    assert e.value.env_index == 2 and isinstance(e.value.__cause__, RuntimeError)
    assert venv.closed


def test_sync_mode_refuses_to_go_on_after_an_interrupted_step() -> None:
    venv = VectorParallelEnv(crash_fns("interrupt"), mode="sync")
    venv.reset()
    venv.step(zeros(venv))
    with pytest.raises(KeyboardInterrupt):
        venv.step(zeros(venv))  # sub-envs 0, 1 stepped, 2 interrupted, 3 not stepped
    with pytest.raises(RuntimeError, match=r"interrupted .*out of step"):
        venv.step(zeros(venv))
    venv.close()


def test_a_killed_worker_is_reported_and_the_others_stopped() -> None:
    venv = VectorParallelEnv(crash_fns("kill"), mode="async", num_workers=2)
    pids = venv.worker_pids
    venv.reset()
    venv.step(zeros(venv))
    with pytest.raises(SubEnvError, match=r"worker process 1 .*sub-envs 2\.\.3\) died .*SIGKILL"):
        venv.step(zeros(venv))
    assert venv.closed and all_gone(pids)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_factory_names_the_subenv(mode: str) -> None:
    before = len(worker_children())
    with pytest.raises(SubEnvError, match=r"sub-env 1 .*could not be built.*cannot open the sim"):
        VectorParallelEnv([DyingEnv, failing_factory], mode=mode)
    assert len(worker_children()) == before


def test_close_stops_workers_at_once() -> None:
    venv = VectorParallelEnv([partial(DyingEnv, FOREVER)] * 3, mode="async", num_workers=2)
    pids = venv.worker_pids
    venv.reset()
    venv.step(zeros(venv))
    venv.close()
    assert not any(alive(p) for p in pids)
    assert not worker_children()


def test_garbage_collection_stops_workers() -> None:
    def make_and_drop() -> list[int]:
        venv = VectorParallelEnv([DyingEnv] * 2, mode="async")
        venv.reset()
        return venv.worker_pids

    pids = make_and_drop()
    gc.collect()
    assert all_gone(pids)


CTRL_C_SCRIPT = """
import os, signal, threading
from functools import partial
import numpy as np
from distmarl.envs import VectorParallelEnv
from tests.envs.toy_envs import DyingEnv

if __name__ == "__main__":
    # Ctrl-C as in a terminal: a suite started in the background (`pytest &` from a script)
    # passes SIGINT down ignored, and Python then leaves it ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    venv = VectorParallelEnv([partial(DyingEnv, (10**9,) * 2, delay=0.02)] * 2, mode="async")
    print(*venv.worker_pids, flush=True)
    venv.reset()
    actions = {a: np.zeros(2) for a in venv.agents}
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        while True:
            venv.step(actions)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    if CATCH:
        try:
            venv.step(actions)
        except RuntimeError as exc:
            print("refused:", exc, flush=True)
        venv.close()
        print("closed", flush=True)
    else:
        raise KeyboardInterrupt  # leave without close(), as an uncaught Ctrl-C does
"""


@pytest.mark.parametrize("catch", [True, False], ids=["caught-then-close", "uncaught"])
def test_ctrl_c_leaves_no_worker_behind(catch: bool) -> None:
    code = CTRL_C_SCRIPT.replace("CATCH", str(catch))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=90
    )
    lines = proc.stdout.splitlines()
    pids = [int(p) for p in lines[0].split()]
    assert len(pids) == 2 and "interrupted" in lines
    if catch:
        assert proc.returncode == 0, proc.stderr
        assert any("refused:" in line and "interrupted" in line for line in lines)
        assert lines[-1] == "closed"
    else:
        assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    assert all_gone(pids)
