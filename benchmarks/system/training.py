"""One training run, timed, for the system benchmarks that measure a run's speed or memory
point by point: :func:`train_cli` (a ``distmarl train`` process: the run's memory and its Ray
end with it, its process watched from outside) or :func:`train_in_process` (the trainer called
here). Benchmarks that compare seeds and arms run sweeps instead
(:mod:`distmarl.studies.sweep`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import ROOT, train_seconds

__all__ = ["Trained", "train_cli", "train_in_process", "train_seconds"]


@dataclass
class Trained:
    """A ``distmarl train`` process's outcome: its summary (None when it failed), wall
    seconds, exit status and working directory (``train.log``, ``summary.json``, ``run/``)."""

    summary: dict[str, Any] | None
    seconds: float
    returncode: int
    workdir: Path

    @property
    def log(self) -> Path:
        return self.workdir / "train.log"

    def error(self) -> str:
        """The exit status and the end of the log, for a run that failed."""
        return (f"exit {self.returncode}; log {self.log}:\n"
                f"{self.log.read_text()[-2000:]}")


def train_cli(config: Path, sets: Sequence[str], *, args: Sequence[str] = (),
              env: Mapping[str, str] | None = None,
              watch: Callable[[int], object] | None = None,
              prefix: str = "distmarl-bench-") -> Trained:
    """One ``distmarl train`` of ``config`` with ``sets`` in its own process (quiet, no
    MLflow, tracking and its run directory ``run`` in a new working directory). ``args``:
    more command-line arguments (``--local``, ``--address``); ``watch(pid)`` is called once
    the process has started (a memory sampler). A failed run returns with ``summary`` None."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    summary = workdir / "summary.json"
    cmd = [sys.executable, "-m", "distmarl.cli", "train", str(config), "--quiet", "--no-mlflow",
           "--run-dir", str(workdir / "run"), "--summary-json", str(summary),
           *[a for s in (f"tracking.directory={workdir}", *sets) for a in ("--set", s)], *args]
    started = time.perf_counter()
    with open(workdir / "train.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=None if env is None else dict(env))
        if watch is not None:
            watch(proc.pid)
        returncode = proc.wait()
    seconds = time.perf_counter() - started
    loaded = json.loads(summary.read_text()) if returncode == 0 else None
    return Trained(loaded, seconds, returncode, workdir)


def train_in_process(config: Path, sets: Sequence[str], local: bool = False) -> dict[str, Any]:
    """The summary of one run of ``config`` with ``sets`` by the trainer in this process
    (``local``: the whole population here, no Ray), MLflow off, tracking in a new directory."""
    from distmarl.config import load_config
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(config, ["tracking.mlflow=false",
                               f"tracking.directory={tempfile.mkdtemp()}", *sets])
    return train(cfg, show_progress=False, local=local)
