"""The benchmark harness (benchmarks.harness): a run already stored is not run again, a run
differing in any label, seed or override is a new run, and worker processes end with the
benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import CONFIGS, ROOT
from benchmarks.harness import Results, Run, run_all

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"


def _score(run: Run) -> dict[str, Any]:
    """A stand-in measure: a figure computed from the run (a module function: picklable)."""
    assert run.seed is not None
    return {"final_score": -10.0 * run.seed - len(run.overrides)}


def test_a_stored_run_is_not_run_again(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    measured: list[Run] = []

    def measure(run: Run) -> dict[str, Any]:
        measured.append(run)
        return _score(run)

    first = [Run.of(CONFIG, 0, ["a=1"], arm="x"), Run.of(CONFIG, 1, ["a=1"], arm="x")]
    run_all(first, measure, Results(path))
    assert measured == first
    stored = json.loads(path.read_text())["runs"]
    assert stored[0] == {"arm": "x", "labels": ["arm"],
                         "config": "examples/configs/speaker_listener_maddpg.yaml", "seed": 0,
                         "overrides": ["a=1"], "final_score": -1.0}

    # the same file again: only the new seed runs; records come back in the order asked
    measured.clear()
    seen: list[dict[str, Any]] = []
    again = [Run.of(CONFIG, 2, ["a=1"], arm="x"), *first]
    records = run_all(again, measure, Results(path), on_record=seen.append)
    assert measured == again[:1] and [r["seed"] for r in seen] == [2]
    assert [r["seed"] for r in records] == [2, 0, 1]
    assert len(json.loads(path.read_text())["runs"]) == 3


def test_another_label_seed_or_override_is_another_run(tmp_path: Path) -> None:
    store = Results(tmp_path / "results.json")
    base = Run.of(CONFIG, 0, ["a=1"], arm="x")
    store.add(base, _score(base))
    assert store.find(base) is not None
    for other in (Run.of(CONFIG, 1, ["a=1"], arm="x"), Run.of(CONFIG, 0, ["a=2"], arm="x"),
                  Run.of(CONFIG, 0, ["a=1"], arm="y"), Run.of(CONFIG, 0, ["a=1"], arm="x", n=2),
                  Run.of(CONFIGS / "spread_mappo.yaml", 0, ["a=1"], arm="x")):
        assert store.find(other) is None, other


def test_figures_may_not_change_the_runs_identity() -> None:
    run = Run.of(CONFIG, 3, arm="x")
    store = Results()
    store.add(run, {"seed": 3, "arm": "x", "score": 1.0})  # repeating it is fine
    with pytest.raises(ValueError, match="overwrite"):
        store.add(run, {"seed": 4})


def test_extra_keys_are_kept_beside_the_runs(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    store = Results(path)
    store.add(Run.of(CONFIG, 0), {"x": 1})
    store.save(summary={"mean": 1.0})
    again = Results(path)
    again.add(Run.of(CONFIG, 1), {"x": 2})
    data = json.loads(path.read_text())
    assert data["summary"] == {"mean": 1.0} and len(data["runs"]) == 2
    assert Run.of(CONFIG, 1, ["b=2"]).sets == ["seed=1", "b=2"] and Run.of(CONFIG).sets == []


def test_a_file_that_is_not_a_results_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps([{"seed": 0}]))
    with pytest.raises(ValueError, match="not a results file"):
        Results(path)


def test_runs_in_worker_processes_are_stored(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    runs = [Run.of(CONFIG, s) for s in (0, 1)]
    records = run_all(runs, _score, Results(path), workers=2)
    assert [r["final_score"] for r in records] == [0.0, -10.0]
    assert len(Results(path).records) == 2


_PARENT = """
import os, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from benchmarks.harness import worker_init
ctx = multiprocessing.get_context("spawn")
pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=worker_init,
                           initargs=(os.getpid(),))
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 120)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_worker_processes_end_when_the_benchmark_is_killed() -> None:
    import signal
    import time

    parent = subprocess.Popen([sys.executable, "-c", _PARENT], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        worker = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)  # no chance to shut its pool down
        parent.wait(timeout=10)
        deadline = time.monotonic() + 15
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker)
    finally:
        parent.kill()
