"""The progress display: a tqdm bar on a terminal, plain lines in a log, both ending at 100%
of the population's env steps even when the last chunks step past it."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from distmarl.runtime.driver.progress import ProgressDisplay

ROOT = Path(__file__).resolve().parents[2]


def steps(total: int, stride: int):
    for done in range(0, total + 3 * stride, stride):  # overshoots, as the last chunks do
        yield {"env_steps": done, "max_env_steps": total, "env_steps_per_s": 1234.0,
               "generation": done // 1000, "best_fitness": -20.0 + done / 1000}


def test_off_a_terminal_a_plain_line_every_tenth_ending_at_100_percent() -> None:
    log = io.StringIO()
    display = ProgressDisplay(log)
    for p in steps(10_000, 300):
        display.show(p)
    display.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and 10 <= len(lines) <= 12
    assert lines[0] == "progress:   0%  0 env steps of 10,000  1,234/s  gen 0  best -20.0"
    assert lines[-1].startswith("progress: 100%  10,000 env steps of 10,000")
    assert sum("100%" in line for line in lines) == 1


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_that_stops_at_its_total() -> None:
    screen = Terminal()
    display = ProgressDisplay(screen)
    for p in steps(10_000, 700):
        display.show(p)
    display.close()
    shown = screen.getvalue()
    assert "\r" in shown and "100%|" in shown and "gen 11  best -8.1" in shown  # the last
    assert "env steps" in shown and "101%" not in shown


def test_a_run_logged_to_a_file_writes_plain_progress_lines(tmp_path: Path) -> None:
    tiny = ROOT / "examples" / "configs" / "tiny.yaml"
    with (tmp_path / "train.log").open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "distmarl", "train", str(tiny), "--local", "--no-mlflow",
             "--set", f"tracking.directory={tmp_path}", "--set", "training.max_steps_per_member=400"],
            stdout=log, stderr=subprocess.STDOUT, timeout=240, cwd=tmp_path)
    text = (tmp_path / "train.log").read_text()
    assert done.returncode == 0, text[-2000:]
    progress = [line for line in text.splitlines() if line.startswith("progress:")]
    assert "\r" not in text and progress and progress[-1].startswith("progress: 100%  800 env steps of 800")
    assert "max_steps after 800 env steps (2 members, 400 each) in " in text
