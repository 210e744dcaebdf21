"""A study's pictures: each arm's learning curve with its band, and the performance profile
(rliable's: the share of runs scoring above each score)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def plot_curves(curves: Mapping[str, Sequence[Sequence[tuple[int, float]]]], path: Path) -> Path:
    """Each arm's best fitness against env steps per member: the mean over its runs (each run's
    curve held at its last value between generations, on the arm's common steps) and a band
    of one standard error."""
    fig, ax = _axes()
    for arm, runs in curves.items():
        runs = [r for r in runs if r]
        if not runs:
            continue
        grid = np.unique(np.concatenate([[s for s, _ in r] for r in runs]))
        ys = np.array([_held(r, grid) for r in runs])
        mean = np.nanmean(ys, axis=0)
        se = (np.nanstd(ys, axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1
              else np.zeros_like(mean))
        ax.plot(grid, mean, label=f"{arm} ({len(runs)} runs)")
        ax.fill_between(grid, mean - se, mean + se, alpha=0.25)
    return _saved(fig, ax, path, "env steps per member", "best fitness")


def plot_profile(scores: Mapping[str, np.ndarray], path: Path, normalised: bool) -> Path:
    """Each arm's performance profile: the share of its runs scoring above each score."""
    every = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores.values()])
    taus = np.linspace(every.min(), every.max(), 200)
    fig, ax = _axes()
    for arm, s in scores.items():
        ax.plot(taus, [(np.asarray(s) > t).mean() for t in taus], label=arm)
    return _saved(fig, ax, path, "normalised score τ" if normalised else "final score τ",
                  "share of runs scoring above τ")


def _axes() -> tuple[Any, Any]:
    """A figure and its axes, drawn without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6, 4))


def _saved(fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str) -> Path:
    """``fig`` labelled, with its legend, written to ``path`` and closed."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _held(run: Sequence[tuple[int, float]], grid: np.ndarray) -> np.ndarray:
    """``run``'s values on ``grid``, each step holding the last value before it (NaN before
    its first)."""
    steps = np.array([s for s, _ in run])
    values = np.array([v for _, v in run], dtype=np.float64)
    at = np.searchsorted(steps, grid, side="right") - 1
    return np.where(at >= 0, values[np.clip(at, 0, None)], np.nan)
