"""A sweep's training runs as ``distmarl train`` processes: started as there is room, watched,
stopped together.

Each run is a process of its own (its memory and its Ray end with it), its output in the run
directory's ``train.log``. How many run at once:

- ``--local``, or one machine: one after another, or ``--parallel N`` at once (each run's local
  Ray then gets this machine's cores divided among the N).
- a Ray cluster (``--address``, or ``$RAY_ADDRESS`` as inside a Ray job): side by side as the
  cluster has room (:mod:`distmarl.studies.schedule`), at most ``--parallel`` where given.

A stop signal (SIGTERM, SIGINT) to the sweep goes to every run in flight: each writes its
checkpoint and exits as ``distmarl train`` does, no other run starts, and the sweep returns
the signal. Runs are started in sessions of their own (a Ctrl-C on the terminal reaches the
sweep alone, which passes it on) and, on Linux, get SIGTERM should the sweep itself die.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from distmarl.runtime.driver.stopping import StopSignals
from distmarl.studies.schedule import Need, Room

#: seconds between looks at the runs in flight
POLL_S = 0.2


@dataclass(frozen=True)
class Placement:
    """Where a sweep's runs train: in their own process without Ray (``local``), on the Ray
    cluster at ``address``, or on a local Ray each; at most ``parallel`` at once (None: one
    at a time on one machine, as the room allows on a cluster)."""

    local: bool = False
    address: str | None = None
    parallel: int | None = None

    def train_args(self) -> list[str]:
        """``distmarl train``'s arguments for this placement (runs sharing this machine on
        local Rays each get its cores divided among them)."""
        if self.local:
            return ["--local"]
        if self.address is not None:
            return ["--address", self.address]
        if self.parallel is not None and self.parallel > 1:
            share = max(1, (os.cpu_count() or 1) // self.parallel)
            return ["--num-cpus", str(share), "--no-dashboard"]
        return []


@dataclass(frozen=True)
class RunLaunch:
    """One training run to start: its name (``<arm>/seed-<s>``), folder, command and need."""

    name: str
    run_dir: Path
    command: list[str]
    need: Need = field(default_factory=lambda: Need(0.0))


@dataclass
class Outcome:
    """What a sweep's runs came to: each ended run's summary by name, the failed ones (name,
    exit status, log), and the stop signal (None: not stopped)."""

    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: list[tuple[str, int, Path]] = field(default_factory=list)
    stop_signal: int | None = None

    def exit_status(self) -> int:
        """The sweep's exit status: the signal's (130, 143) when stopped, 1 when a run
        failed, else 0."""
        from distmarl.runtime.driver.stopping import exit_code

        if self.stop_signal is not None:
            return exit_code(self.stop_signal)
        return 1 if self.failed else 0


@dataclass
class _Running:
    launch: RunLaunch
    proc: subprocess.Popen[bytes]
    log: IO[bytes]


def run_launches(launches: Sequence[RunLaunch], room: Room | None, cap: int | None,
                 say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Run every launch, each as soon as ``room`` (None: no accounting) has space for it and
    fewer than ``cap`` run (None: no cap); the outcome once all have ended, or once the runs
    in flight have stopped after a stop signal. ``say`` gets a line as each starts and ends."""
    pending, outcome = list(launches), Outcome()
    running: list[_Running] = []
    by_name = {launch.name: launch for launch in launches}
    room = room if room is not None else Room.of({"CPU": float("inf")})
    with StopSignals() as signals:
        while pending or running:
            if signals.received is None and pending:
                for name in room.start([(x.name, x.need) for x in pending], len(running), cap):
                    launch = by_name[name]
                    pending.remove(launch)
                    running.append(_start(launch))
                    say(f"started {name}")
            if signals.received is not None and outcome.stop_signal is None:
                outcome.stop_signal = signals.received
                pending.clear()
                for run in running:
                    _signal(run.proc, signals.received)
            for run in [r for r in running if r.proc.poll() is not None]:
                running.remove(run)
                run.log.close()
                room.free(run.launch.need)
                _ended(run, outcome, say)
            time.sleep(POLL_S)
    return outcome


def _start(launch: RunLaunch) -> _Running:
    launch.run_dir.mkdir(parents=True, exist_ok=True)
    log = (launch.run_dir / "train.log").open("ab")
    proc = subprocess.Popen(launch.command, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_end_with_parent if sys.platform.startswith("linux")
                            else None)
    return _Running(launch, proc, log)


def _end_with_parent() -> None:
    """In the child before it runs the command: SIGTERM when the sweep's process ends
    (``prctl(PR_SET_PDEATHSIG)``), so a sweep killed outright leaves no run behind. One
    call into a C library loaded beforehand: between fork and exec the child may run little
    (another thread of the sweep's may have held a lock when it forked)."""
    assert _LIBC is not None  # Linux only
    _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _signal(proc: subprocess.Popen[bytes], signum: int) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)


def _ended(run: _Running, outcome: Outcome, say: Callable[[str], None]) -> None:
    """Record how ``run`` ended: its summary (it ended by itself, or a signal stopped it after
    its checkpoint), else a failure."""
    name, code = run.launch.name, run.proc.returncode
    summary_file = run.launch.run_dir / "summary.json"
    stopped = code in (128 + signal.SIGINT, 128 + signal.SIGTERM)
    if (code == 0 or stopped) and summary_file.exists():
        outcome.summaries[name] = json.loads(summary_file.read_text())
        say(f"{'stopped' if stopped else 'finished'} {name}: {last_line(run.launch.run_dir)}")
        return
    outcome.failed.append((name, code, run.launch.run_dir / "train.log"))
    say(f"FAILED {name} (exit {code}); its log: {run.launch.run_dir / 'train.log'}")


def last_line(run_dir: Path) -> str:
    """The last ``distmarl:`` line of a run's ``train.log`` (its result), without the prefix."""
    log = run_dir / "train.log"
    lines = [ln for ln in log.read_text(errors="replace").splitlines()
             if ln.startswith("distmarl: ")] if log.exists() else []
    return lines[-1].removeprefix("distmarl: ") if lines else ""
