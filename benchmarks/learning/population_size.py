"""Sixteen members against the main job's four, at about the same wall-clock.

    .venv/bin/python -m benchmarks.learning.population_size [--seeds 0 1 2] [--arms 4 16 16_mf]
        [--steps16 28000] [--set key=value ...] [--out DIR]

Arms, each a ``distmarl train`` of examples/configs/speaker_listener_maddpg.yaml on a local
Ray per seed:

* ``4``: the main job as it is (4 members, its ``training.max_steps_per_member`` each);
* ``16``: 16 members in generation-synchronous tournaments, ``--steps16`` env steps each;
* ``16_mf``: 16 members in multiple-frequency PBT, 8 evolving every 5,000 env steps and 8
  every 20,000, ``--steps16`` env steps each.

``--steps16`` is the env steps per member that 16 members reach in the main job's
wall-clock at the population env steps/s ``benchmarks.system.scaling`` measured for both sizes
(``members_per_learner: auto``); every run's training seconds are printed, so the budgets
can be compared. Printed per run and per arm (mean and standard error over the seeds): the
elite's final score on the 100 fixed episodes, population env steps/s, training and start-up
seconds; and per 16-member arm the paired difference, seed by seed, against ``4``. The runs
are a sweep (:mod:`distmarl.studies.sweep`) in ``--out``: a second call with the same folder
runs only what it lacks, and ``distmarl report`` reads it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, RUNS, exit_status, train_seconds
from distmarl.studies.plan import SweepPlan
from distmarl.studies.stats import fmt_mean_se, paired_difference
from distmarl.studies.sweep import finished_runs, run_sweep

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"

ARMS: dict[str, list[str]] = {
    "4": [],
    "16": ["population.size=16"],
    "16_mf": ["population.size=16", "evolution.mode=multi_frequency",
              "evolution.subpopulations=[{size: 8, evo_steps: 5000}, "
              "{size: 8, evo_steps: 20000}]",
              "evolution.bottom_frac=0.25", "evolution.top_frac=0.25",
              "evolution.migration_frac=0.25"],
}


def plan(arms: Sequence[str], seeds: Sequence[int], steps16: int, extra: Sequence[str]
         ) -> SweepPlan:
    """The sweep of ``arms`` at ``seeds`` (``extra``: the user's overrides, of every run,
    applied last)."""
    return SweepPlan.of(CONFIG, seeds, {
        arm: [*ARMS[arm], *([] if arm == "4" else [f"training.max_steps_per_member={steps16}"]),
              *extra] for arm in arms}, ["tracking.mlflow=false"])


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One run's figures, from its summary."""
    seconds = train_seconds(summary)
    return {"final_score": summary["final_score"],
            "env_steps_per_s": summary["env_steps"] / seconds,
            "train_seconds": seconds, "setup_seconds": summary["setup_seconds"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--steps16", type=int, default=28_000,
                        help="env steps per member of the 16-member arms")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value of every run")
    parser.add_argument("--out", type=Path, default=RUNS / "population_size",
                        help="the sweep's folder: runs finished there are not run again")
    args = parser.parse_args(argv)
    sweep = plan(args.arms, args.seeds, args.steps16, args.set)
    outcome = run_sweep(sweep, args.out, say=lambda line: print(line, flush=True))
    rows = [{"arm": run.arm, "seed": run.seed, **figures(summary)}
            for run, summary in finished_runs(sweep, args.out)]
    for r in rows:
        print(f"seed {r['seed']} arm {r['arm']:>5}: final score {r['final_score']:.1f}, "
              f"{r['env_steps_per_s']:,.0f} env steps/s, training {r['train_seconds']:.0f} s, "
              f"start-up {r['setup_seconds']:.1f} s")
    by = {a: [r for r in rows if r["arm"] == a] for a in args.arms}
    for arm, rs in by.items():
        print(f"arm {arm}: final score {fmt_mean_se([r['final_score'] for r in rs])}, env "
              f"steps/s {fmt_mean_se([r['env_steps_per_s'] for r in rs])}, training "
              f"{fmt_mean_se([r['train_seconds'] for r in rs])} s, start-up "
              f"{fmt_mean_se([r['setup_seconds'] for r in rs])} s (seeds "
              f"{[r['seed'] for r in rs]})")
    if "4" in by:
        four = {r["seed"]: r["final_score"] for r in by["4"]}
        for arm in (a for a in args.arms if a != "4"):
            paired = paired_difference({r["seed"]: r["final_score"] for r in by[arm]}, four)
            diffs = [] if paired is None else paired.differences
            print(f"paired difference {arm} - 4: {fmt_mean_se(diffs)} ({diffs})")
    return outcome.exit_status()


if __name__ == "__main__":
    raise SystemExit(exit_status(main))
