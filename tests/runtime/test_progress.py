"""The progress display: a tqdm bar on a terminal, plain lines in a log, both ending at 100%
of the population's env steps even when the last chunks step past it (a whole run's lines in a
log file: tests/runtime/test_local_fleet.py, the CLI's ``--local`` run)."""

from __future__ import annotations

import io

from distmarl.runtime.driver.progress import ProgressDisplay


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
