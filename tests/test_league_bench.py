"""``benchmarks.learning.league --resume``: an earlier ``--out``'s runs found per game and
seed and copied in to be continued, and what is missing named before any training starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.learning.league import continue_runs, earlier_runs, game_plan


def write_runs(tmp_path: Path, seeds: list[int]) -> Path:
    """An earlier ``--out`` with a finished connect_four run per seed."""
    earlier = tmp_path / "earlier"
    for seed in seeds:
        run = earlier / "connect_four" / "base" / f"seed-{seed}"
        (run / "checkpoints").mkdir(parents=True)
        (run / "summary.json").write_text("{}")
    return earlier


def test_an_earlier_folder_gives_each_seeds_run_to_continue(tmp_path: Path) -> None:
    earlier = write_runs(tmp_path, [0, 1, 2])
    runs = earlier_runs(earlier, ["connect_four"], [2, 0])
    assert runs == {("connect_four", s): earlier / "connect_four" / "base" / f"seed-{s}"
                    for s in (2, 0)}
    out = tmp_path / "later" / "connect_four"
    continue_runs(game_plan("connect_four", [0, 2], 1000, 10), out, runs, "connect_four")
    for seed in (0, 2):  # copied without the summary: the sweep resumes them
        assert (out / "base" / f"seed-{seed}" / "checkpoints").is_dir()
        assert not (out / "base" / f"seed-{seed}" / "summary.json").exists()
    assert (earlier / "connect_four" / "base" / "seed-0" / "summary.json").exists()


def test_a_missing_seed_game_or_checkpoint_folder_is_named(tmp_path: Path) -> None:
    earlier = write_runs(tmp_path, [0, 1])
    with pytest.raises(ValueError, match="no connect_four run of seed 2 with checkpoints"):
        earlier_runs(earlier, ["connect_four"], [0, 2])
    with pytest.raises(ValueError, match="no tictactoe run of seed 0"):
        earlier_runs(earlier, ["tictactoe"], [0])
    (earlier / "connect_four" / "base" / "seed-1" / "checkpoints").rmdir()
    with pytest.raises(ValueError, match="no connect_four run of seed 1 with checkpoints"):
        earlier_runs(earlier, ["connect_four"], [1])
