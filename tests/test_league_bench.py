"""``benchmarks.learning.league --resume``: an earlier ``--json``'s runs found per game and
seed, and what is missing named before any training starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning.league import earlier_runs


def write_results(tmp_path: Path, seeds: list[int]) -> Path:
    """An earlier ``--json`` (a harness results file) with a connect_four run per seed."""
    runs = []
    for seed in seeds:
        run = tmp_path / f"league-connect_four-{seed}" / "run"
        (run / "checkpoints").mkdir(parents=True)
        runs.append({"game": "connect_four", "seed": seed, "run_dir": str(run)})
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps({"runs": runs}))
    return path


def test_an_earlier_results_file_gives_each_seeds_run_directory(tmp_path: Path) -> None:
    path = write_results(tmp_path, [0, 1, 2])
    runs = earlier_runs(path, ["connect_four"], [2, 0])
    assert runs == {("connect_four", 2): tmp_path / "league-connect_four-2" / "run",
                    ("connect_four", 0): tmp_path / "league-connect_four-0" / "run"}


def test_a_missing_seed_game_or_checkpoint_folder_is_named(tmp_path: Path) -> None:
    path = write_results(tmp_path, [0, 1])
    with pytest.raises(ValueError, match="no connect_four run of seed 2 with checkpoints"):
        earlier_runs(path, ["connect_four"], [0, 2])
    with pytest.raises(ValueError, match="no tictactoe run of seed 0"):
        earlier_runs(path, ["tictactoe"], [0])
    (tmp_path / "league-connect_four-1" / "run" / "checkpoints").rmdir()
    with pytest.raises(ValueError, match="no connect_four run of seed 1 with checkpoints"):
        earlier_runs(path, ["connect_four"], [1])
