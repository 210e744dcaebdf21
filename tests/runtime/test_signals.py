"""Stopping a run from outside, as a shell, ``timeout``, a container runtime or a scheduler does:
SIGTERM and SIGINT to a real ``distmarl train`` stop it after the calls in flight with a
checkpoint, a summary and the MLflow runs KILLED, exiting 143 / 130; ``--resume`` then goes on to
``max_steps``; a second signal exits at once; a run started with SIGINT ignored (a script's
``cmd &``) keeps ignoring it. The signals go to the driver's whole process group (what
``timeout`` and a terminal's Ctrl-C do). In process (``--local``): two runs started together,
one ignoring SIGINT, stopped by SIGTERM and resumed to the end; on Ray, whose processes must be
out of the signals' way, a double SIGINT that leaves no Ray process behind, then the run resumed
from its last checkpoint and stopped by SIGTERM (its env the docs' worked example, imported by
Ray's workers from the driver's PYTHONPATH).

Also here, without Ray: the signal handling itself, the process group the driver gives Ray, and
run directories that never collide. Every test passes whether the test run itself started with
SIGINT ignored or not."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distmarl.runtime.driver.trainer import new_run_dir
from distmarl.runtime.fleets.process_group import own_process_group

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
#: the docs' worked example: an env of the user's own, in a module found on the PYTHONPATH
#: (``examples/your_env/chase_env.py``), trained with ``tiny.yaml``'s settings
EXAMPLE = ROOT / "examples" / "your_env"
OWN_ENV = ["--set", "env.spec=chase_env:parallel_env", "--set", "env.kwargs={max_steps: 25}"]
#: env steps per member on Ray (never reached before the signal) and between its checkpoints
#: (soon after Ray's start-up)
MAX_STEPS, RAY_CHECKPOINT_INTERVAL = 4000, 100
#: env steps per member in process: a checkpoint every 200 (a generation), the stop lands after
#: the second, about 4 s of training on 2 cores
LOCAL_MAX_STEPS = 1200


# ---------------------------------------------------------------------------------- helpers
@dataclass
class Train:
    """A ``distmarl train`` process, the files its stdout and stderr go to (files: Ray's
    processes would hold a pipe open after the driver has gone) and its ``max_steps``."""

    proc: subprocess.Popen
    out: Path
    err: Path
    max_steps: int

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit code and stdout, once it ends."""
        self.proc.wait(timeout=timeout)
        return self.proc.returncode, self.out.read_text()

    def stop(self, signum: int, timeout: float = 120, twice: bool = False) -> tuple[int, str]:
        """Send ``signum`` to its whole process group (``twice``: first to the driver, then
        to its group, at once, as ``timeout`` does); :meth:`wait`."""
        if twice:
            os.kill(self.proc.pid, signum)
        os.killpg(self.proc.pid, signum)
        return self.wait(timeout)

    def stderr_tail(self) -> str:
        return self.err.read_text()[-3000:]


def start_train(tmp: Path, *args: str, config: Path = TINY, local: bool = False,
                max_steps: int | None = None, sigint_ignored: bool = False,
                env: dict[str, str] | None = None) -> Train:
    """``distmarl train tiny.yaml`` in a process group of its own (as a shell starts a job): on
    a local Ray of 2 CPUs without its dashboard, or in process (``local``). Either way a signal
    to the group reaches the driver alone: Ray's processes and env worker processes start in a
    group of their own.
    ``max_steps`` per member: by default :data:`MAX_STEPS` on Ray, :data:`LOCAL_MAX_STEPS` in
    process. ``sigint_ignored``: started with SIGINT ignored, as a script's ``cmd &`` is.
    ``env``: variables added to this process's environment."""
    n = len(list(tmp.glob("stderr-*.txt")))
    out, err = tmp / f"stdout-{n}.txt", tmp / f"stderr-{n}.txt"
    where = ["--local"] if local else [
        "--num-cpus", "2", "--no-dashboard",
        "--set", f"tracking.checkpoint_interval={RAY_CHECKPOINT_INTERVAL}"]
    if max_steps is None:
        max_steps = LOCAL_MAX_STEPS if local else MAX_STEPS
    command = [sys.executable, "-m", "distmarl.cli", "train", str(config), "--quiet", *where,
               "--set", f"tracking.directory={tmp / 'runs'}",
               "--set", f"training.max_steps_per_member={max_steps}", *args]
    # SIGINT set for the new process either way: the test run itself may have started with it
    # ignored, which the child would inherit
    command = [sys.executable, "-c", EXEC_WITH_SIGINT, "ignore" if sigint_ignored else "default",
               *command]
    with out.open("w") as out_file, err.open("w") as err_file:
        proc = subprocess.Popen(command, stdout=out_file, stderr=err_file, cwd=ROOT,
                                process_group=0, env={**os.environ, **(env or {})})
    return Train(proc, out, err, max_steps)


#: sets SIGINT (``ignore`` or ``default``) then becomes the command given (same process)
EXEC_WITH_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, "
                    "signal.SIG_IGN if sys.argv[1] == 'ignore' else signal.SIG_DFL); "
                    "os.execv(sys.argv[2], sys.argv[2:])")


def wait_for(what: str, check: Callable[[], Any], run: Train, timeout: float = 240) -> Any:
    """``check()``'s first truthy value (polled); fails if the run ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if run.proc.poll() is not None:
            pytest.fail(f"the run ended (exit {run.proc.returncode}) before {what}: "
                        f"{run.stderr_tail()}")
        time.sleep(0.2)
    pytest.fail(f"no {what} after {timeout} s")


def steps(run_dir: Path | None) -> list[int]:
    """The steps of the complete checkpoints in ``run_dir`` (none where it is None)."""
    if run_dir is None:
        return []
    return sorted(int(p.parent.name.removeprefix("step-"))
                  for p in run_dir.glob("checkpoints/step-*/manifest.json"))


def only_run_dir(tmp: Path) -> Path | None:
    """The one run directory under ``tmp/runs``, once there is one."""
    found = list((tmp / "runs").glob("*"))
    assert len(found) <= 1, found
    return found[0] if found else None


def run_statuses(summary: dict[str, Any]) -> dict[str, str]:
    """The MLflow status of the run's parent and member runs (read from its SQLite store)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(summary["mlflow"]["uri"])
    ids = {"parent": summary["mlflow"]["parent"],
           **{f"member {i}": r for i, r in enumerate(summary["mlflow"]["members"])}}
    return {name: client.get_run(run_id).info.status for name, run_id in ids.items()}


def descendants(pid: int) -> set[int]:
    """Every process started by ``pid``, recursively (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p}
        todo.extend(kids - found)
        found |= kids
    return found


def stop_at_a_checkpoint(run_dir: Callable[[], Path | None], run: Train, signum: int,
                         after: int = 0, twice: bool = False) -> dict[str, Any]:
    """Once ``run`` has saved a checkpoint past ``after`` env steps in ``run_dir()`` (its
    directory once it exists), send ``signum`` to its process group (``twice``: as ``timeout``
    does, see :meth:`Train.stop`): it exits ``128 + signum``
    with a summary naming the signal, a checkpoint at the summary's step, no final evaluation
    and its MLflow runs KILLED. Returns the summary."""
    name = signal.Signals(signum).name
    wait_for(f"a checkpoint after step {after}",
             lambda: steps(run_dir()) and steps(run_dir())[-1] > after, run)
    code, out = run.stop(signum, twice=twice)
    assert code == 128 + signum, run.stderr_tail()
    path = run_dir()
    assert path is not None
    summary = json.loads((path / "summary.json").read_text())
    assert summary["run_dir"] == str(path)
    assert summary["stop_reason"] == f"stopped by {name}" and summary["stop_signal"] == signum
    assert f"distmarl: stopped by {name} after {summary['env_steps']:,} env steps" in out
    assert Path(summary["checkpoint"]).name == f"step-{summary['env_steps']:012d}"
    assert after < steps(path)[-1] == summary["env_steps"] < 2 * run.max_steps
    assert summary["final_score"] is None  # no final evaluation on a stop
    assert set(run_statuses(summary).values()) == {"KILLED"}
    assert f"{name}: stopping after the calls in flight" in run.err.read_text()
    return summary


# ---------------------------------------------------------------------------------- real runs
def new_run_dirs(runs: Path, taken: set[Path]) -> list[Path]:
    """The run directories under ``runs`` made since ``taken`` were."""
    return sorted(set(runs.iterdir()) - taken)


def run_dir_marked(runs: Path, taken: set[Path], marker: str) -> Callable[[], Path | None]:
    """A finder of the new run directory whose ``config.yaml`` holds ``marker``."""
    def find() -> Path | None:
        for path in new_run_dirs(runs, taken):
            config = path / "config.yaml"
            if config.is_file() and marker in config.read_text():
                return path
        return None
    return find


@pytest.mark.slow
def test_runs_started_together_one_ignoring_sigint_stop_on_sigterm_resume_and_finish(
        tmp_path: Path) -> None:
    """In process (``--local``), two ``distmarl train`` of one config started at once, as two
    runs started in one second: the plain ``<time>-tiny`` names of the next two minutes are
    taken beforehand, so both must claim suffixed names in the same seconds, and each is
    tracked in MLflow in its own run directory. The first, its envs in worker processes (the
    run keeps them out of the group the signals go to), starts with SIGINT ignored (a script's
    ``cmd &``): a SIGINT to its group changes nothing, the run saves again, and SIGTERM then
    stops it with a checkpoint (143), though it comes twice at once, as from ``timeout``;
    ``--resume`` takes it to ``max_steps``, in the same directory and MLflow runs, FINISHED.
    The second, meanwhile, is stopped by SIGINT with a checkpoint (130)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    now = time.time()
    taken = {runs / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now + s))}-tiny"
             for s in range(120)}
    for path in taken:
        path.mkdir()
    ignoring = start_train(tmp_path, "--set", "env.vector_mode=async", local=True,
                           sigint_ignored=True)
    other = start_train(tmp_path, "--set", "seed=7", local=True, max_steps=MAX_STEPS)
    find = run_dir_marked(runs, taken, "vector_mode: async")

    wait_for("a checkpoint", lambda: steps(find()), ignoring)
    ignored_at = steps(find())[-1]
    os.killpg(ignoring.proc.pid, signal.SIGINT)
    first = stop_at_a_checkpoint(find, ignoring, signal.SIGTERM, after=ignored_at, twice=True)
    assert "SIGINT" not in ignoring.err.read_text()
    assert "SIGTERM again" not in ignoring.err.read_text()
    assert first["ray"] is None  # in process
    run_dir = Path(first["run_dir"])

    done = stop_at_a_checkpoint(run_dir_marked(runs, taken, "\nseed: 7\n"), other,
                                signal.SIGINT)
    made = new_run_dirs(runs, taken)
    assert len(made) == 2 and all(p.name.endswith(("-tiny-2", "-tiny-3")) for p in made)
    (other_dir,) = set(made) - {run_dir}
    assert done["run_dir"] == str(other_dir) and (other_dir / "mlflow.db").exists()
    assert done["mlflow"]["uri"] != first["mlflow"]["uri"]

    run = start_train(tmp_path, "--resume", str(run_dir), local=True)
    code, out = run.wait(timeout=400)
    assert code == 0, run.stderr_tail()
    last = json.loads((run_dir / "summary.json").read_text())
    assert last["stop_reason"] == "max_steps" and last["stop_signal"] is None
    assert all(m["env_steps"] >= LOCAL_MAX_STEPS for m in last["members"])
    assert last["resumed_from"].endswith(f"step-{first['env_steps']:012d}")
    assert last["final_score"] is not None and last["mlflow"] == first["mlflow"]
    assert set(run_statuses(last).values()) == {"FINISHED"}
    assert "distmarl: max_steps after" in out
    assert new_run_dirs(runs, taken) == made


@pytest.mark.ray
@pytest.mark.slow
def test_on_ray_a_double_sigint_exits_at_once_and_sigterm_stops_its_resumed_run(
        tmp_path: Path) -> None:
    """On a local Ray, whose processes the driver keeps out of its process group: a double
    Ctrl-C (SIGINT twice to the group) exits 130 at once, with no summary, and Ray's processes
    end with the driver. Its last complete checkpoint stays: ``--resume`` goes on from it on Ray
    (its learners' and buffer's states loaded into the actors, whose ``ray.init`` takes
    SIGTERM's handler), and SIGTERM to the group, once it has saved again, stops it cleanly.
    Ray's warning of actor handles among constructor arguments (the buffer's, handed over by
    name) is not printed. The env is the docs' worked example, its module on the driver's
    PYTHONPATH only: Ray's workers import it from there (they collect, so the run saves), and
    the start of a local Ray says nothing of the token it makes for itself."""
    own_env = {"PYTHONPATH": os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")])}
    run = start_train(tmp_path, *OWN_ENV, env=own_env)
    wait_for("a checkpoint", lambda: steps(only_run_dir(tmp_path)), run)
    ray_processes = descendants(run.proc.pid)
    assert ray_processes  # the raylet, the GCS, the workers
    dashboards = [_cmdline(pid) for pid in ray_processes if b"dashboard.py" in _cmdline(pid)]
    assert dashboards and all(b"--disable-frontend" in c for c in dashboards)  # --no-dashboard
    os.killpg(run.proc.pid, signal.SIGINT)
    time.sleep(0.5)  # well within the stop (the calls in flight, a checkpoint, Ray's shutdown)
    sent = time.monotonic()
    code, _ = run.stop(signal.SIGINT, timeout=30)
    assert code == 130 and time.monotonic() - sent < 2
    assert "SIGINT again: exiting now" in run.err.read_text()
    assert not list((tmp_path / "runs").glob("*/summary.json"))
    deadline = time.monotonic() + 30  # Ray's processes end with their parent
    while time.monotonic() < deadline and ray_processes & _pids():
        time.sleep(0.5)
    assert not ray_processes & _pids()

    run_dir = only_run_dir(tmp_path)
    assert run_dir is not None
    last = steps(run_dir)[-1]
    saved = json.loads((run_dir / "checkpoints" / f"step-{last:012d}" / "meta.json").read_text())
    run = start_train(tmp_path, *OWN_ENV, "--resume", str(run_dir), env=own_env)
    stopped = stop_at_a_checkpoint(lambda: only_run_dir(tmp_path), run, signal.SIGTERM,
                                   after=last)
    assert stopped["ray"]["address"] and not stopped["ray"]["dashboard"]  # on Ray, no dashboard
    assert stopped["mlflow"] == saved["mlflow"] and stopped["mlflow"]["parent"]
    assert stopped["resumed_from"].endswith(f"step-{last:012d}")
    for before, after in zip(saved["members"], stopped["members"], strict=True):
        assert after["env_steps"] > before["env_steps"] and after["updates"] > before["updates"]
        assert after["fitness"][:len(before["fitness"])] == before["fitness"]
    assert "constructor arguments in the object store" not in run.err.read_text()
    assert "spec: chase_env:parallel_env" in (run_dir / "config.yaml").read_text()
    for text in (run.err.read_text(), run.out.read_text()):
        assert "authentication" not in text


def _pids() -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}


def _cmdline(pid: int) -> bytes:
    """``pid``'s command line (empty once it has gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# ---------------------------------------------------------------------------------- no Ray
HANDLER_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from distmarl.runtime.driver.stopping import StopSignals

    signal.signal(signal.SIGINT, signal.{sigint})  # as the process was started
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIG{first})
        time.sleep(0.5)
        print("received", signals.received, signals.reason, flush=True)
        if {twice}:
            os.kill(os.getpid(), signal.SIG{first})
            time.sleep(5)
            print("still here", flush=True)
    after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    print("restored", after == before, flush=True)
""")


def handler_script(first: str, twice: bool, sigint: str = "default_int_handler") -> str:
    return HANDLER_SCRIPT.format(first=first, twice=twice, sigint=sigint)


@pytest.mark.parametrize("name,code", [("INT", 130), ("TERM", 143)])
def test_the_first_signal_is_noted_and_a_second_exits_with_128_plus_signum(name: str,
                                                                         code: int) -> None:
    """As Python starts from a terminal (SIGINT raising KeyboardInterrupt); the handlers from
    before come back at the end."""
    once = subprocess.run([sys.executable, "-c", handler_script(name, twice=False)],
                          capture_output=True, text=True, timeout=60)
    assert once.returncode == 0, once.stderr
    number = int(getattr(signal, f"SIG{name}"))
    assert once.stdout.splitlines() == [f"received {number} stopped by SIG{name}",
                                        "restored True"]
    assert f"distmarl: SIG{name}: stopping after the calls in flight" in once.stderr
    twice = subprocess.run([sys.executable, "-c", handler_script(name, twice=True)],
                           capture_output=True, text=True, timeout=60)
    assert twice.returncode == code
    assert "still here" not in twice.stdout
    assert f"distmarl: SIG{name} again: exiting now, without a checkpoint" in twice.stderr


def test_sigint_ignored_before_stays_ignored_and_sigterm_still_stops() -> None:
    """Started with SIGINT ignored (``cmd &`` in a script, ``nohup cmd &``): SIGINT is left
    ignored (twice: no exit), SIGTERM is noted, and SIGINT is still ignored at the end."""
    ignored = subprocess.run([sys.executable, "-c", handler_script("INT", True, "SIG_IGN")],
                             capture_output=True, text=True, timeout=60)
    assert ignored.returncode == 0, ignored.stderr
    assert ignored.stdout.splitlines() == ["received None None", "still here", "restored True"]
    assert "SIGINT" not in ignored.stderr
    term = subprocess.run([sys.executable, "-c", handler_script("TERM", False, "SIG_IGN")],
                          capture_output=True, text=True, timeout=60)
    assert term.returncode == 0, term.stderr
    assert term.stdout.splitlines() == [f"received {int(signal.SIGTERM)} stopped by SIGTERM",
                                        "restored True"]


DELIVERED_TWICE_SCRIPT = textwrap.dedent("""
    import os, signal, time
    from distmarl.runtime.driver.stopping import StopSignals

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
    with StopSignals() as signals:
        pid = os.getpid()
        os.kill(pid, signal.SIGTERM)  # timeout: the process, then its group (the same one here)
        os.killpg(os.getpgid(pid), signal.SIGTERM)
        time.sleep(0.5)
        print("survived", signals.received, flush=True)
        os.kill(pid, signal.SIGTERM)  # a second stop, later
        time.sleep(5)
        print("still here", flush=True)
""")


def test_one_stop_delivered_twice_at_once_is_one_stop_and_a_later_one_exits() -> None:
    """``timeout`` sends its signal to the process and then to its whole process group, so the
    driver gets it twice at once: that is one stop (a checkpoint follows), not a second one;
    the same signal half a second later exits at once."""
    proc = subprocess.run([sys.executable, "-c", DELIVERED_TWICE_SCRIPT], capture_output=True,
                          text=True, timeout=60, process_group=0)
    assert proc.returncode == 143, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [f"survived {int(signal.SIGTERM)}"]
    assert proc.stderr.count("distmarl: SIGTERM: stopping after the calls in flight") == 1
    assert "distmarl: SIGTERM again: exiting now" in proc.stderr


BLOCKED_SCRIPT = textwrap.dedent("""
    import subprocess, sys, threading
    from distmarl.runtime.driver.stopping import StopSignals

    with StopSignals():
        seen = []
        thread = threading.Thread(target=lambda: seen.append(subprocess.run(
            ["grep", "SigBlk", "/proc/self/status"], capture_output=True, text=True).stdout))
        thread.start()
        thread.join()
        print(seen[0].split()[1], flush=True)
""")


def test_processes_started_while_the_signals_are_caught_do_not_block_them() -> None:
    """A process started during a run (Ray's raylet and GCS, an env's subprocess) must still
    take the SIGTERM that ends it: none of the stop signals is blocked in it."""
    proc = subprocess.run([sys.executable, "-c", BLOCKED_SCRIPT], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    blocked = int(proc.stdout.strip(), 16)
    assert not blocked & ((1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1)))


GROUP_SCRIPT = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from distmarl.runtime.fleets.process_group import own_process_group

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not what a wrapper may have ignored
    group = os.getpgrp()
    with own_process_group(enabled=sys.argv[1] == "own"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    assert os.getpgrp() == group
    signal.signal(signal.SIGTERM, lambda *a: print("driver got it", flush=True))
    os.killpg(group, signal.SIGTERM)
    time.sleep(0.5)
    print("child alive", child.poll() is None, flush=True)
    child.kill()
""")
#: runs the script as a member of a group it leads, ignoring SIGTERM itself (as ``timeout`` does)
WRAPPER = ("import signal, subprocess, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
           "sys.exit(subprocess.call([sys.executable, '-c', *sys.argv[1:]]))")


@pytest.mark.parametrize("leader", [True, False], ids=["leads its group", "under timeout"])
def test_processes_started_in_own_process_group_miss_a_signal_to_the_drivers_group(
        leader: bool) -> None:
    """A shell's job leads its group; under ``timeout`` the driver is a member of timeout's."""
    def run(mode: str) -> list[str]:
        command = [sys.executable, "-c", GROUP_SCRIPT, mode]
        if not leader:
            command = [sys.executable, "-c", WRAPPER, GROUP_SCRIPT, mode]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              process_group=0)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    assert run("own") == ["driver got it", "child alive True"]
    assert run("shared") == ["driver got it", "child alive False"]  # what it prevents


ORPHANED_SCRIPT = textwrap.dedent("""
    import os, subprocess, sys, time
    from distmarl.runtime.fleets.process_group import own_process_group

    leader = os.getpgrp()  # the launcher leads this group, and exits at once
    while os.path.exists(f"/proc/{leader}"):  # until it has exited and been reaped
        time.sleep(0.05)
    with own_process_group() as moved:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(moved is not None, os.getpgrp() == os.getpid(), os.getpgid(child.pid) == moved,
          flush=True)
    child.kill()
""")
#: starts the script (in the new group it leads) and exits at once: the script is left alone in
#: its group (as ``(cmd &)`` from a shell that then exits)
LAUNCHER = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1]])"


def test_a_driver_left_alone_in_its_group_leads_a_new_one_after_moving_out() -> None:
    """Its group ceases to exist once it moves out, so it cannot go back: it leads a group of
    its own, and what it started stays in the group it moved to."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, ORPHANED_SCRIPT],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                process_group=0)
    assert launcher.wait(timeout=60) == 0
    out, err = launcher.communicate(timeout=60)  # until the script has closed them too
    assert out.split() == ["True"] * 3, err


def test_own_process_group_changes_nothing_when_disabled() -> None:
    group = os.getpgrp()
    with own_process_group(enabled=False):
        assert os.getpgrp() == group


# ---------------------------------------------------------------------------------- run dirs
def _claim(directory: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    out.put(str(new_run_dir(directory, "tiny")))


def _check_names(paths: list[Path]) -> None:
    """Distinct, created, and within each second ``<time>-tiny``, ``-2``, ``-3``, ..."""
    assert len(set(paths)) == len(paths) and all(p.is_dir() for p in paths)
    by_second: dict[str, list[str]] = {}
    for p in paths:
        stamp = "-".join(p.name.split("-")[:2])
        by_second.setdefault(stamp, []).append(p.name.removeprefix(f"{stamp}-tiny"))
    for suffixes in by_second.values():
        assert sorted(suffixes, key=lambda s: int(s[1:] or 1)) == (
            [""] + [f"-{n}" for n in range(2, len(suffixes) + 1)])
    assert max(len(s) for s in by_second.values()) > 1  # names did collide


def test_run_directories_claimed_at_once_by_threads_are_distinct(tmp_path: Path) -> None:
    barrier, paths = threading.Barrier(16), []
    lock = threading.Lock()

    def claim() -> None:
        barrier.wait()
        path = new_run_dir(tmp_path / "runs", "tiny")
        with lock:
            paths.append(path)

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_names(paths)


def test_run_directories_claimed_at_once_by_processes_are_distinct(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(str(tmp_path / "runs"), barrier, out))
             for _ in range(8)]
    for p in procs:
        p.start()
    paths = [Path(out.get(timeout=60)) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _check_names(paths)
