"""A study's report: many runs' results read from their run directories, grouped into arms,
with honest statistics (:mod:`distmarl.studies.stats`).

A run's arm is what ``study.json`` in its directory names (a sweep writes it), else the name
of the folder of runs it was found in, else (a run directory given itself) its config's
``name``; its task is its env (``env.spec``); its score is the
final evaluation's (the elite on the fixed final episodes), else its best fitness. Per arm:
the final score's mean and standard error, the IQM with its 95% stratified bootstrap interval;
between arms: the probability of improvement with its interval, and the paired difference over
the seeds both ran. Several tasks aggregate as rliable does, each task's scores normalised
from random play's (0) to the best run's (1).

Written: ``report.md`` (the tables), ``report.json`` (marl-eval's layout:
``{env: {task: {arm: {"run_<seed>": {"step_<g>": {"step_count", "return"},
"absolute_metrics": {"return"}}}}}}``), ``curves.png`` (each arm's best fitness against env
steps per member, mean and standard error over seeds) and ``profile.png`` (the performance
profile: the share of runs scoring above each normalised score).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from distmarl.studies.stats import (
    Estimate,
    improvement_interval,
    iqm_interval,
    mean_se,
    normalised,
    paired_difference,
)

#: the file a sweep writes into each run directory: its arm, the arm's overrides and the seed
STUDY_FILE = "study.json"


@dataclass(frozen=True)
class RunResult:
    """One run's result: its ``arm``, ``seed``, ``task`` (env), final ``score``, random play's
    ``random`` score (None where not evaluated) and its ``curve`` of ``(env steps per member,
    best fitness)`` per generation."""

    arm: str
    seed: int
    task: str
    score: float
    random: float | None
    curve: list[tuple[int, float]] = field(default_factory=list)


def read_run(run_dir: Path, arm: str | None = None) -> RunResult | None:
    """The result of the run in ``run_dir`` (of ``arm`` unless its ``study.json`` names one;
    None: its config's name); None when it has no summary or no score yet."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
    except FileNotFoundError:
        return None
    score = summary.get("final_score")
    score = summary.get("best_fitness") if score is None else score
    if score is None:
        return None
    study = run_dir / STUDY_FILE
    if study.exists():
        arm = str(json.loads(study.read_text())["arm"])
    arm = str(config["name"]) if arm is None else arm
    members = max(1, len(summary.get("members", [])))
    curve = [(int(steps) // members, max(fit)) for (_, steps), fit
             in zip(summary.get("generation_marks", []), summary.get("fitness_history", []))
             if fit]
    return RunResult(arm, int(config["seed"]), str(config["env"]["spec"]), float(score),
                     summary.get("random_score"), curve)


def find_runs(paths: Iterable[Path]) -> list[RunResult]:
    """Every run under ``paths``: each a run directory, or a folder holding run directories
    (a sweep's, at any depth: its runs are of the arm named after it unless they say); in
    arm, task and seed order."""
    found: list[RunResult] = []
    for path in paths:
        if (path / "summary.json").exists():
            runs = [read_run(path)]
        else:
            runs = [read_run(p.parent, path.resolve().name)
                    for p in sorted(path.rglob("summary.json"))]
        found += [r for r in runs if r is not None]
    return sorted(found, key=lambda r: (r.arm, r.task, r.seed))


@dataclass
class Report:
    """The statistics of ``runs`` (:func:`find_runs`), intervals from ``seed``'s bootstrap."""

    runs: list[RunResult]
    seed: int = 0
    arms: list[str] = field(init=False)
    tasks: list[str] = field(init=False)
    #: each task's normalisation: random play's mean score (0) and the best run's (1)
    low: np.ndarray = field(init=False)
    high: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("no finished run found: a report needs run directories with a "
                             "summary.json (a run's, or a sweep's folder of them)")
        self.arms = sorted({r.arm for r in self.runs})
        self.tasks = sorted({r.task for r in self.runs})
        self.low = np.array([np.mean([r.random for r in self.runs
                                      if r.task == t and r.random is not None] or [0.0])
                             for t in self.tasks])
        self.high = np.array([max(r.score for r in self.runs if r.task == t)
                              for t in self.tasks])

    def value(self, run: RunResult) -> float:
        """``run``'s score as the report counts it: itself with one task, else normalised
        on its task's scale."""
        if len(self.tasks) == 1:
            return run.score
        t = self.tasks.index(run.task)
        return float(normalised(np.array(run.score), self.low[t], self.high[t]))

    def scores(self, arm: str) -> np.ndarray:
        """``arm``'s scores ``(runs, tasks)`` (:meth:`value`; runs per task: the fewest any
        task has)."""
        per_task = [[self.value(r) for r in self.runs if r.arm == arm and r.task == t]
                    for t in self.tasks]
        n = min(len(s) for s in per_task)
        return np.array([s[:n] for s in per_task], dtype=np.float64).T

    def by_seed(self, arm: str) -> dict[int, float]:
        """``arm``'s score per seed: the mean of its runs' :meth:`value` (one per task)."""
        seeds = sorted({r.seed for r in self.runs if r.arm == arm})
        return {s: float(np.mean([self.value(r) for r in self.runs
                                  if r.arm == arm and r.seed == s])) for s in seeds}

    def iqm(self, arm: str) -> Estimate:
        return iqm_interval(self.scores(arm), np.random.default_rng(self.seed))

    def improvement(self, x: str, y: str) -> Estimate:
        return improvement_interval(self.scores(x), self.scores(y),
                                    np.random.default_rng(self.seed))

    # ------------------------------------------------------------------ outputs
    def markdown(self) -> str:
        """The tables: each arm's runs, seeds, mean ± standard error and IQM [95% CI], then
        each pair's probability of improvement [95% CI] and paired difference."""
        scale = ("" if len(self.tasks) == 1 else " (each task normalised: random play 0, the "
                 "best run 1)")
        lines = [f"Tasks: {', '.join(self.tasks)}{scale}. Intervals: 95% stratified "
                 f"bootstrap (seed {self.seed}).", "",
                 "| arm | runs | seeds | final score (mean ± s.e.) | IQM [95% CI] |",
                 "| --- | --- | --- | --- | --- |"]
        for arm in self.arms:
            by_seed = self.by_seed(arm)
            est = self.iqm(arm)
            lines.append(f"| {arm} | {sum(1 for r in self.runs if r.arm == arm)} | "
                         f"{_seeds(by_seed)} | {_pm(*mean_se(list(by_seed.values())))} | "
                         f"{est.value:.2f} [{est.low:.2f}, {est.high:.2f}] |")
        pairs = [(x, y) for i, x in enumerate(self.arms) for y in self.arms[i + 1:]]
        if pairs:
            lines += ["", "| X | Y | P(X > Y) [95% CI] | X - Y paired over seeds |",
                      "| --- | --- | --- | --- |"]
            for x, y in pairs:
                p = self.improvement(x, y)
                d = paired_difference(self.by_seed(x), self.by_seed(y))
                paired = "no shared seed" if d is None else (
                    f"{_pm(d.mean, d.se, '+.2f')} (seeds {_seeds(dict.fromkeys(d.seeds))})")
                lines.append(f"| {x} | {y} | {p.value:.2f} [{p.low:.2f}, {p.high:.2f}] | "
                             f"{paired} |")
        return "\n".join(lines) + "\n"

    def marl_eval(self) -> dict[str, Any]:
        """The runs in marl-eval's JSON layout (env family, task, arm, ``run_<seed>``)."""
        out: dict[str, Any] = {}
        for r in self.runs:
            env, _, task = r.task.partition(":")
            run: dict[str, Any] = {f"step_{g}": {"step_count": steps, "return": [best]}
                                   for g, (steps, best) in enumerate(r.curve)}
            run["absolute_metrics"] = {"return": [r.score]}
            out.setdefault(env, {}).setdefault(task or env, {}).setdefault(
                r.arm, {})[f"run_{r.seed}"] = run
        return out

    def write(self, out: Path) -> list[Path]:
        """``report.md``, ``report.json``, ``curves.png`` and ``profile.png`` in ``out``."""
        from distmarl.studies.plots import plot_curves, plot_profile

        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(self.markdown())
        (out / "report.json").write_text(json.dumps(self.marl_eval(), indent=1))
        curves = {arm: [r.curve for r in self.runs if r.arm == arm] for arm in self.arms}
        profile = {arm: self.scores(arm).ravel() for arm in self.arms}
        return [out / "report.md", out / "report.json",
                plot_curves(curves, out / "curves.png"),
                plot_profile(profile, out / "profile.png", normalised=len(self.tasks) > 1)]


def _pm(mean: float, se: float | None, spec: str = ".2f") -> str:
    """``mean ± se`` (the mean alone for one seed)."""
    return f"{mean:{spec}}" if se is None else f"{mean:{spec}} ± {se:.2f}"


def _seeds(by_seed: dict[int, Any] | Sequence[int]) -> str:
    return ", ".join(str(s) for s in by_seed)
