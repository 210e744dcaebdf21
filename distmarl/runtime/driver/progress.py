"""The run's progress as a user reads it: a tqdm bar on a terminal, plain lines elsewhere.

Progress is counted in env steps of the whole population (members x
``training.max_steps_per_member``): the bar's total. The last chunks of a run may step past it (each
member finishes its chunk), so the bar stops at its total, at 100%; the run's last line
gives the exact count. Off a terminal (a log file, a CI job) the bar would be one long line of
carriage returns, so a plain line is written every tenth of the run and at the end instead.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

#: plain lines (off a terminal): one per this share of the run
PLAIN_EVERY = 0.1


def progress_text(p: dict[str, Any]) -> str:
    """What follows the bar: the generation and the best fitness (a league: each side's best
    rating)."""
    best = "n/a" if p["best_fitness"] is None else f"{p['best_fitness']:.1f}"
    ratings = p.get("best_rating")
    if ratings:
        sides = "  ".join(f"{side} {r:.1f}" for side, r in ratings.items())
        best = f"rating {best}" if len(ratings) == 1 else f"rating {sides}"
    else:
        best = f"best {best}"
    return f"gen {p['generation']}  {best}"


class ProgressDisplay:
    """Shows :func:`~distmarl.runtime.coordinator.run.progress` dicts on ``stream``: a tqdm bar
    when it is a terminal, plain lines otherwise; :meth:`close` ends it."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar: Any = None
        self.next_plain = 0.0
        self.plain_done = -1

    def show(self, p: dict[str, Any]) -> None:
        total = max(1, int(p["max_env_steps"]))
        done = min(int(p["env_steps"]), total)
        if self.tty:
            self._bar(total).update(done - self.bar.n)
            self.bar.set_postfix_str(progress_text(p), refresh=True)
        elif done / total >= self.next_plain or (done == total != self.plain_done):
            self.next_plain = done / total + PLAIN_EVERY
            self.plain_done = done
            self.stream.write(f"progress: {100 * done / total:3.0f}%  {done:,} env steps of "
                              f"{total:,}  {p['env_steps_per_s']:,.0f}/s  {progress_text(p)}\n")
            self.stream.flush()

    def _bar(self, total: int) -> Any:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=self.stream, unit=" env steps", unit_scale=True,
                            dynamic_ncols=True, smoothing=0.1)
        return self.bar

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
