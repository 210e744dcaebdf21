"""Checkpoints written in the background, kept by a retention rule, copied to the run's storage.

The coordinator takes a checkpoint's states at a step boundary (every learner's state, the
buffer's, the run's: plain data, copies) and hands them to :class:`CheckpointWriter`: one
thread writes the files (:func:`~distmarl.checkpoint.save_checkpoint`, atomically), another
copies the newest written to the run's storage (:meth:`~distmarl.storage.Storage.put_checkpoint`,
the manifest last), while training goes on. One checkpoint's states wait at most (a writer
slower than the checkpoint interval holds the next hand-over until it has room, so states
never pile up); a storage slower than the interval, or away for a while, is sent the newest
checkpoint when it is free, those written meanwhile counted as ``superseded``.

Kept: the last ``keep`` and the best (the one taken at the highest fitness of any member's
latest), here and on the storage. A checkpoint that cannot be written or copied (a full disk,
a store that stays unreachable after its retries) is reported in the log and in
:meth:`CheckpointWriter.report` and training goes on; the next one is tried as usual.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distmarl.checkpoint import PREFIX, folder_name, list_checkpoints, save_checkpoint
from distmarl.storage import Storage

log = logging.getLogger(__name__)


@dataclass
class Taken:
    """A checkpoint's states, taken at ``step`` when the best member's latest fitness was
    ``fitness`` (None: no member evaluated yet)."""

    step: int
    meta: dict[str, Any]
    members: list[dict[str, Any]]
    buffer_state: list[dict[str, Any]] | None
    snapshots: dict[str, dict[str, Any]]
    fitness: float | None


@dataclass
class WriterReport:
    """What the writer did: checkpoints written here and copied to storage, their bytes and
    seconds, and each one that failed (``{"step", "where", "error"}``)."""

    written: int = 0
    stored: int = 0
    superseded: int = 0
    stored_bytes: int = 0
    store_s: float = 0.0
    write_s: float = 0.0
    failed: list[dict[str, Any]] = field(default_factory=list)


class CheckpointWriter:
    """Writes checkpoints under ``root`` in a thread of its own, keeping the last ``keep`` and
    the best, and copies each to ``storage`` (None: none)."""

    def __init__(self, root: Path, keep: int, storage: Storage | None = None) -> None:
        self.root, self.keep, self.storage = root, keep, storage
        self.report = WriterReport()
        self.best: tuple[float, str] | None = None  # (fitness, folder name)
        self._jobs: queue.Queue[Taken] = queue.Queue(maxsize=1)
        self._idle = threading.Condition()
        self._outstanding = 0  # handed over and not yet written (and stored)
        self._to_store: Path | None = None  # the newest written, not yet being stored
        self._threads: list[threading.Thread] = []

    def submit(self, taken: Taken) -> Path:
        """Write ``taken`` in the background (waiting while the previous hand-over is not
        taken up yet); the folder it will be written to."""
        if not self._threads:
            self._threads = [threading.Thread(target=loop, name=name, daemon=True)
                             for loop, name in [(self._write_loop, "distmarl-checkpoints"),
                                                (self._store_loop, "distmarl-storage")]]
            for thread in self._threads:
                thread.start()
        with self._idle:
            self._outstanding += 1
        self._jobs.put(taken)
        return self.root / folder_name(taken.step)

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every checkpoint handed over is written, and the newest stored (up to
        ``timeout_s``); False when time ran out first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._outstanding == 0, timeout_s)

    def _write_loop(self) -> None:
        while True:
            taken = self._jobs.get()
            path = self._write(taken)
            with self._idle:
                if path is not None and self.storage is not None:
                    if self._to_store is not None:  # never started: the newer one goes instead
                        self.report.superseded += 1
                        self._outstanding -= 1
                    self._to_store = path
                else:
                    self._outstanding -= 1
                self._idle.notify_all()

    def _store_loop(self) -> None:
        while True:
            with self._idle:
                self._idle.wait_for(lambda: self._to_store is not None)
                path, self._to_store = self._to_store, None
            assert path is not None
            self._store(path)
            with self._idle:
                self._outstanding -= 1
                self._idle.notify_all()

    def _write(self, taken: Taken) -> Path | None:
        name = folder_name(taken.step)
        if taken.fitness is not None and (self.best is None or taken.fitness > self.best[0]):
            self.best = (taken.fitness, name)
        began = time.perf_counter()
        try:
            path = save_checkpoint(self.root, taken.step, taken.meta, taken.members,
                                   taken.buffer_state, keep_last=self.keep,
                                   snapshots=taken.snapshots, protect=self._kept())
        except Exception as err:  # anything: the thread must outlive a failed checkpoint
            self._failed(taken.step, "here", err)
            return None
        self.report.written += 1
        self.report.write_s += time.perf_counter() - began
        return path

    def _kept(self) -> set[str]:
        return {self.best[1]} if self.best else set()

    def _store(self, path: Path) -> None:
        assert self.storage is not None
        began = time.perf_counter()
        try:
            self.report.stored_bytes += self.storage.put_checkpoint(path)
            self.report.stored += 1
            self.report.store_s += time.perf_counter() - began
            kept = self._kept() | {p.name for p in list_checkpoints(self.root)}
            for old in self.storage.names("checkpoints"):
                if old.startswith(PREFIX) and old not in kept and old < path.name:
                    self.storage.delete(f"checkpoints/{old}")
        except Exception as err:  # StorageError, a folder pruned meanwhile: the thread goes on
            self._failed(int(path.name.removeprefix(PREFIX)), self.storage.uri, err)

    def _failed(self, step: int, where: str, err: BaseException) -> None:
        log.warning("checkpoint at step %d could not be written to %s: %s", step, where, err)
        self.report.failed.append({"step": step, "where": where, "error": str(err)})
