"""The background checkpoint writer: what it keeps (the last N and the best), here and on a
storage folder, and what it reports when the storage cannot be written."""

from __future__ import annotations

from pathlib import Path

import torch

from distmarl.checkpoint import list_checkpoints, load_checkpoint
from distmarl.runtime.records.checkpoints import CheckpointWriter, Taken
from distmarl.storage import Storage


def taken(step: int, fitness: float | None) -> Taken:
    return Taken(step, {"step": step}, [{"w": torch.full((2,), float(step))}], None, {},
                 fitness)


def test_the_last_checkpoints_and_the_best_are_kept_here_and_on_storage(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "kept").child("run")
    writer = CheckpointWriter(tmp_path / "run" / "checkpoints", keep=2, storage=storage)
    for step, fitness in [(10, -5.0), (20, -1.0), (30, -3.0), (40, None), (50, -4.0)]:
        path = writer.submit(taken(step, fitness))
        assert writer.flush(30)
        assert path.exists()
    kept = [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")]
    assert kept == ["step-000000000020", "step-000000000040", "step-000000000050"]
    assert storage.checkpoints() == kept  # the same set on the storage, each complete
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / kept[0]).members[0]["w"][0] == 20
    report = writer.report
    assert (report.written, report.stored, report.failed) == (5, 5, [])
    assert report.stored_bytes > 0


def test_a_storage_that_cannot_be_written_is_reported_and_the_checkpoint_kept_here(
        tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the storage's folder would be")
    storage = Storage(blocker).child("run")
    storage.attempts, storage.backoff_s = 2, 0.01
    writer = CheckpointWriter(tmp_path / "run", keep=3, storage=storage)
    writer.submit(taken(10, 1.0))
    assert writer.flush(30)
    assert writer.report.written == 1 and writer.report.stored == 0
    [failure] = writer.report.failed
    assert failure["step"] == 10 and failure["where"] == storage.uri
    assert load_checkpoint(tmp_path / "run").step == 10
