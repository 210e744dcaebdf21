"""The statistics a study reports: a mean and its standard error over seeds, paired
differences, and rliable's aggregates (Agarwal et al., 2021) with stratified bootstrap
confidence intervals.

Seeds are few (3 to 5), so the standard error is the sample standard deviation (``n - 1``)
over ``sqrt(n)``, and there is none for one seed (None, not 0: one seed says nothing about
spread). A paired difference takes the arms' difference per seed first: the seeds' shared luck
(an easy draw of episodes, a good initialisation) cancels, which resolves differences that the
two arms' own standard errors would hide.

Aggregates over runs and tasks (envs), as rliable computes them:

- the interquartile mean (IQM): the mean of the middle 50% of all runs' (normalised) scores,
  robust to an outlying seed and less noisy than the median;
- the probability of improvement ``P(X > Y)``: the chance that a run of arm X on a task beats
  a run of arm Y (ties counting a half), averaged over tasks;
- their 95% confidence intervals by the stratified bootstrap: each task's runs resampled with
  replacement on their own (scipy's ``bootstrap`` over one sample per task), percentile
  intervals.

Scores are arrays ``(runs, tasks)``; a seeded ``numpy.random.Generator`` makes the intervals
repeat exactly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: bootstrap resamples of an interval (rliable's default)
RESAMPLES = 2000


def mean_se(xs: Sequence[float]) -> tuple[float, float | None]:
    """The mean of ``xs`` (at least one value) and its standard error; the error is None for
    one value."""
    m = statistics.fmean(xs)
    return m, (statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None)


def pm(mean: float, se: float | None, spec: str = ".1f") -> str:
    """``"mean +- se"``, each formatted by ``spec``; the mean alone when ``se`` is None."""
    return f"{mean:{spec}}" if se is None else f"{mean:{spec}} +- {se:{spec}}"


def fmt_mean_se(xs: Sequence[float], spec: str = ".1f") -> str:
    """:func:`pm` of :func:`mean_se` of ``xs``; ``"-"`` when there is no value."""
    return pm(*mean_se(xs), spec) if xs else "-"


@dataclass(frozen=True)
class Paired:
    """``a - b`` per seed over the seeds both arms ran, in seed order, and the mean and standard
    error of those differences."""

    seeds: list[int]
    differences: list[float]
    mean: float
    se: float | None


def paired_difference(a: Mapping[int, float], b: Mapping[int, float]) -> Paired | None:
    """``a[seed] - b[seed]`` for every seed both arms ran (``{seed: score}`` each), with the
    differences' mean and standard error; None when they share no seed."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    diffs = [a[s] - b[s] for s in seeds]
    return Paired(seeds, diffs, *mean_se(diffs))


# ---------------------------------------------------------------------------------- aggregates
def iqm(scores: np.ndarray) -> float:
    """The interquartile mean of every run's score on every task: ``scores`` ``(runs, tasks)``
    (or ``(runs,)``), the mean of the middle 50% (the lowest and highest 25% trimmed, as
    ``scipy.stats.trim_mean`` trims)."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(scores, dtype=np.float64).ravel(), 0.25))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """``P(X > Y)``: on each task (a column), the share of run pairs where ``x``'s run beats
    ``y``'s (ties half), the Mann-Whitney U statistic over ``runs_x * runs_y``; averaged over
    tasks. ``x`` ``(runs_x, tasks)``, ``y`` ``(runs_y, tasks)``."""
    x, y = _runs_by_task(x), _runs_by_task(y)
    return float(np.mean([_beats(xt, yt) for xt, yt in zip(x.T, y.T, strict=True)]))


def _beats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The share of run pairs where ``a``'s run beats ``b``'s (ties half): ``a`` ``(..., n)``,
    ``b`` ``(..., m)`` (one task's runs, after any batch axes) -> ``(...)``."""
    return ((a[..., :, None] > b[..., None, :]).mean(axis=(-2, -1))
            + 0.5 * (a[..., :, None] == b[..., None, :]).mean(axis=(-2, -1)))


@dataclass(frozen=True)
class Estimate:
    """A statistic's value on the scores and its ``level`` confidence interval."""

    value: float
    low: float
    high: float
    level: float = 0.95


def iqm_interval(scores: np.ndarray, rng: np.random.Generator, level: float = 0.95,
                 resamples: int = RESAMPLES) -> Estimate:
    """:func:`iqm` of ``scores`` ``(runs, tasks)`` with its stratified bootstrap interval."""
    from scipy.stats import trim_mean

    def statistic(*tasks: np.ndarray, axis: int = -1) -> np.ndarray:
        """The IQM of each resample: ``tasks`` ``(..., runs)`` each."""
        return np.asarray(trim_mean(np.concatenate(tasks, axis=-1), 0.25, axis=-1))

    return _bootstrapped(statistic, list(_runs_by_task(scores).T), iqm(scores), rng, level,
                         resamples)


def improvement_interval(x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
                         level: float = 0.95, resamples: int = RESAMPLES) -> Estimate:
    """:func:`probability_of_improvement` of ``x`` over ``y`` with its stratified bootstrap
    interval (both arms' runs resampled on each task, independently)."""
    x, y = _runs_by_task(x), _runs_by_task(y)
    tasks = x.shape[1]

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        """``P(X > Y)`` of each resample: ``samples`` ``(..., runs)`` each, x's tasks then
        y's."""
        return np.asarray(np.mean([_beats(a, b) for a, b in zip(samples[:tasks],
                                                                 samples[tasks:], strict=True)],
                                  axis=0))

    return _bootstrapped(statistic, [*x.T, *y.T], probability_of_improvement(x, y), rng,
                         level, resamples)


def _bootstrapped(statistic: Callable[..., np.ndarray], samples: Sequence[np.ndarray],
                  value: float, rng: np.random.Generator, level: float, resamples: int
                  ) -> Estimate:
    """``statistic`` (vectorised: over samples whose last axis holds the runs) over
    ``samples`` (one per stratum) with a percentile interval from ``resamples`` resamples of
    each sample on its own (scipy's ``bootstrap``)."""
    from scipy.stats import bootstrap

    if all(len(s) < 2 for s in samples):
        return Estimate(value, value, value, level)  # one run each: nothing to resample
    result = bootstrap([np.asarray(s, dtype=np.float64) for s in samples], statistic,
                       n_resamples=resamples, confidence_level=level, method="percentile",
                       vectorized=True, random_state=rng)
    low, high = result.confidence_interval
    return Estimate(value, float(low), float(high), level)


def normalised(scores: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``scores`` ``(runs, tasks)`` on each task's scale from ``low`` (0: random play) to
    ``high`` (1: the best score), so tasks of different scales aggregate."""
    span = np.where(np.asarray(high) - np.asarray(low) == 0, 1.0, np.asarray(high) - low)
    return (np.asarray(scores, dtype=np.float64) - low) / span


def _runs_by_task(scores: np.ndarray) -> np.ndarray:
    a = np.asarray(scores, dtype=np.float64)
    return a[:, None] if a.ndim == 1 else a
