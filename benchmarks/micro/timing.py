"""One timing rule for the in-process benchmarks: the best of several windows."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_rate(fn: Callable[[], Any], seconds: float, windows: int = 5, warmup: int = 3,
              batch: int = 1) -> float:
    """Calls per second of ``fn``: the best of ``windows`` timing windows that together last
    about ``seconds``, after ``warmup`` calls (which also take lazy allocation out of the
    timing). ``fn`` runs ``batch`` times between clock reads. The best window, as ``timeit``
    reports its minimum, is the figure least disturbed by other processes on a shared
    machine."""
    for _ in range(warmup):
        fn()
    best = 0.0
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while True:
            for _ in range(batch):
                fn()
            calls += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / windows:
                break
        best = max(best, calls / elapsed)
    return best
