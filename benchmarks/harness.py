"""One harness for the benchmarks that train: runs (a config, a seed, ``--set`` overrides and
labels naming the arm) measured one after another or in worker processes, each run's figures
stored as a record of one JSON file as soon as the run ends.

The file is ``{"runs": [record, ...], ...}`` (other top-level keys are a benchmark's own
summary). A record is the run's identity (its labels, config, seed and overrides) followed by
the figures its measure returned, in one flat object that reports read by key. A run whose
identity a stored record already has is not run again: a benchmark stopped part way (a long
learning benchmark, a machine reclaimed) goes on where it stopped when given the same file,
and a run with other overrides is a new run.

Training happens in :func:`train_cli` (a ``distmarl train`` process: the run's memory and its
Ray end with it) or :func:`train_in_process` (the trainer called here, for benchmarks that
compare the Ray and in-process fleets or read the summary's live objects).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import ROOT

Record = dict[str, Any]


@dataclass(frozen=True)
class Run:
    """One training run: ``config`` with ``seed`` and ``overrides`` (``--set`` style, applied
    in order after the seed), and ``labels`` (``(name, value)`` pairs such as the arm) that
    name it in reports. ``seed`` None: the config's own."""

    config: Path
    seed: int | None = None
    overrides: tuple[str, ...] = ()
    labels: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, config: Path, seed: int | None = None, overrides: Sequence[str] = (),
           **labels: Any) -> Run:
        """A run from plain arguments: ``Run.of(config, 0, ["a=1"], arm="evolving")``."""
        return cls(Path(config), seed, tuple(overrides), tuple(labels.items()))

    def label(self, name: str) -> Any:
        """The value of label ``name`` (KeyError when the run has none)."""
        return dict(self.labels)[name]

    @property
    def sets(self) -> list[str]:
        """The run's ``--set`` values: the seed first, then the overrides."""
        return [*([] if self.seed is None else [f"seed={self.seed}"]), *self.overrides]

    def identity(self) -> Record:
        """What a stored record holds to be this run (JSON values): the labels, their names
        (``labels``: a run with one label more is another run), the config (relative to the
        repository), the seed and the overrides."""
        config = self.config.resolve()
        shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
        return {**dict(self.labels), "labels": [name for name, _ in self.labels],
                "config": str(shown), "seed": self.seed, "overrides": list(self.overrides)}


class Results:
    """The records of a results file (``path`` None: kept in memory only)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        data: Any = json.loads(path.read_text()) if path is not None and path.exists() else {}
        if not isinstance(data, dict) or not isinstance(data.get("runs", []), list):
            raise ValueError(f"{path}: not a results file of benchmarks.harness (an object "
                             "whose 'runs' is a list of records)")
        self.records: list[Record] = data.get("runs", [])
        self.extra: dict[str, Any] = {k: v for k, v in data.items() if k != "runs"}

    def find(self, run: Run) -> Record | None:
        """The stored record of ``run``, or None."""
        want = run.identity()
        return next((r for r in self.records
                     if all(k in r and r[k] == v for k, v in want.items())), None)

    def add(self, run: Run, figures: Mapping[str, Any]) -> Record:
        """Store ``run``'s ``figures`` (saved at once); figures may repeat an identity value,
        never change it (the record would no longer be found)."""
        identity = run.identity()
        clash = [k for k, v in figures.items() if k in identity and v != identity[k]]
        if clash:
            raise ValueError(f"figures {clash} would overwrite the run's identity {identity}")
        record = {**identity, **figures}
        self.records.append(record)
        self.save()
        return record

    def save(self, **extra: Any) -> None:
        """Write the records and ``extra`` (kept with what the file held) to the file."""
        self.extra.update(extra)
        if self.path is not None:
            self.path.write_text(json.dumps({"runs": self.records, **self.extra}, indent=1,
                                            default=str))


def run_all(runs: Sequence[Run], measure: Callable[[Run], Mapping[str, Any]],
            results: Results | None = None, workers: int | None = None,
            on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """The record of every run in ``runs``, in their order: the stored ones read back, the
    others measured and stored as each ends (``on_record`` sees each new record).
    ``workers`` None: one run after another in this process; a number: that many worker
    processes (:func:`worker_init`; ``measure`` must then be picklable, a module's function
    or a ``functools.partial`` of one)."""
    results = results if results is not None else Results()
    todo = [run for run in runs if results.find(run) is None]
    if workers is None:
        for run in todo:
            _store(results, run, measure(run), on_record)
    elif todo:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init,
                                 initargs=(os.getpid(),)) as pool:
            futures = {pool.submit(measure, run): run for run in todo}
            for future in as_completed(futures):
                _store(results, futures[future], future.result(), on_record)
    found = [results.find(run) for run in runs]
    return [r for r in found if r is not None]


def _store(results: Results, run: Run, figures: Mapping[str, Any],
           on_record: Callable[[Record], None] | None) -> None:
    record = results.add(run, figures)
    if on_record is not None:
        on_record(record)


def worker_init(parent: int | None = None) -> None:
    """A worker process: nice 10 (other people share the machine), one torch thread, and
    (Linux) it ends with ``parent``, the benchmark's process, even when that one is killed
    outright (runs last many minutes)."""
    os.nice(10)
    if parent is not None:
        die_with_parent(parent)
    import torch

    torch.set_num_threads(1)


def die_with_parent(parent: int) -> None:
    """Ask Linux to send this process SIGTERM when its parent process ``parent`` ends
    (``prctl(PR_SET_PDEATHSIG)``), and exit at once if it has already ended. Elsewhere: no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(1)


@dataclass
class Trained:
    """A ``distmarl train`` process's outcome: its summary (None when it failed), wall
    seconds, exit status and working directory (``train.log``, ``summary.json``, ``run/``)."""

    summary: dict[str, Any] | None
    seconds: float
    returncode: int
    workdir: Path

    @property
    def run_dir(self) -> Path:
        return self.workdir / "run"

    @property
    def log(self) -> Path:
        return self.workdir / "train.log"

    def error(self) -> str:
        """The exit status and the end of the log, for a run that failed."""
        return (f"exit {self.returncode}; log {self.log}:\n"
                f"{self.log.read_text()[-2000:]}")


def train_cli(config: Path, sets: Sequence[str], *, resume: Path | None = None,
              args: Sequence[str] = (), env: Mapping[str, str] | None = None,
              watch: Callable[[int], object] | None = None, check: bool = True,
              prefix: str = "distmarl-bench-") -> Trained:
    """One ``distmarl train`` of ``config`` with ``sets`` in its own process (quiet, no
    MLflow, tracking in a new working directory), its run directory ``run`` there (a copy of
    ``resume``, an earlier run directory, continued from its last checkpoint). ``args``: more
    command-line arguments (``--local``, ``--address``); ``watch(pid)`` is called once the
    process has started (a memory sampler); ``check``: a failed run raises
    :class:`subprocess.CalledProcessError` (else it returns with ``summary`` None)."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    run_dir, summary = workdir / "run", workdir / "summary.json"
    if resume is not None:
        shutil.copytree(resume, run_dir)
    cmd = [sys.executable, "-m", "distmarl.cli", "train", str(config), "--quiet", "--no-mlflow",
           *(["--resume", str(run_dir)] if resume is not None else ["--run-dir", str(run_dir)]),
           "--summary-json", str(summary),
           *[a for s in (f"tracking.directory={workdir}", *sets) for a in ("--set", s)], *args]
    started = time.perf_counter()
    with open(workdir / "train.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=None if env is None else dict(env))
        if watch is not None:
            watch(proc.pid)
        returncode = proc.wait()
    seconds = time.perf_counter() - started
    if returncode != 0 and check:
        raise subprocess.CalledProcessError(returncode, cmd, output=f"see {workdir / 'train.log'}")
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


def train_seconds(summary: Mapping[str, Any]) -> float:
    """Seconds of training in a run summary: its wall seconds without the start-up (actors
    importing torch, making envs), which rates are taken over."""
    return float(summary["wall_seconds"] - summary["setup_seconds"])
