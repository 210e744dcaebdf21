"""The statistics every benchmark reports with: a mean and its standard error over seeds, and
paired differences (two arms compared seed by seed).

Seeds are few (3 to 5), so the standard error is the sample standard deviation (``n - 1``)
over ``sqrt(n)``, and there is none for one seed (None, not 0: one seed says nothing about
spread). A paired difference takes the arms' difference per seed first: the seeds' shared luck
(an easy draw of episodes, a good initialisation) cancels, which resolves differences that the
two arms' own standard errors would hide.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


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
