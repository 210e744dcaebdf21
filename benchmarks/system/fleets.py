"""The main job on Ray and in one process: the same result, and each one's speed.

    .venv/bin/python -m benchmarks.system.fleets [--seeds 0 1 2] [--set key=value ...] [--out DIR]

Runs examples/configs/speaker_listener_maddpg.yaml (the README's main job) once per seed on a
local Ray and once with ``--local`` (the whole population in one process), each a ``distmarl
train`` process of a sweep (:mod:`distmarl.studies.sweep`), then prints, per
seed and as a mean with its standard error: the elite's final score on the fixed episodes,
random play's, the paired difference (Ray - in process), population env steps/s over the
training time and the start-up seconds. A second in-process run of the first seed checks that
the summary repeats exactly (clocks, paths and tracking ids aside). A second call with the
same ``--out`` runs only what its sweeps lack.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, RUNS, exit_status, train_seconds
from distmarl.studies.plan import SweepPlan
from distmarl.studies.runner import Placement
from distmarl.studies.stats import fmt_mean_se, paired_difference
from distmarl.studies.sweep import finished_runs, run_sweep

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"
#: summary keys that differ between two runs of one seed: clocks, paths and tracking ids
UNREPEATABLE = {"wall_seconds", "setup_seconds", "setup_phases", "env_steps_per_s", "run_dir",
                "checkpoint", "mlflow", "elite_model_uri", "generation_marks", "tracking",
                "ray", "stop_signal"}


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """One run's figures and a digest of the summary's repeatable part (two runs repeat
    exactly when the digests agree)."""
    repeatable = {k: v for k, v in summary.items() if k not in UNREPEATABLE}
    digest = hashlib.sha256(json.dumps(repeatable, sort_keys=True, default=str).encode())
    seconds = train_seconds(summary)
    return {"final_score": summary["final_score"], "random_score": summary["random_score"],
            "env_steps_per_s": summary["env_steps"] / seconds,
            "setup_seconds": summary["setup_seconds"], "summary_digest": digest.hexdigest()}


def sweeps(seeds: Sequence[int], sets: Sequence[str]
           ) -> list[tuple[str, SweepPlan, Placement]]:
    """The sweeps, by folder: the main job per seed on a local Ray (arm ``ray``) and in one
    process (``local``), and the first seed once more in one process (``again``)."""
    sets = ["tracking.mlflow=false", *sets]
    return [("ray", SweepPlan.of(CONFIG, seeds, {"ray": []}, sets), Placement()),
            ("local", SweepPlan.of(CONFIG, seeds, {"local": []}, sets), Placement(local=True)),
            ("local", SweepPlan.of(CONFIG, seeds[:1], {"again": []}, sets),
             Placement(local=True))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value of every run")
    parser.add_argument("--out", type=Path, default=RUNS / "fleets",
                        help="the sweeps' folder: runs finished there are not run again")
    args = parser.parse_args(argv)
    rows, status = [], 0
    for folder, plan, placement in sweeps(args.seeds, args.set):
        outcome = run_sweep(plan, args.out / folder, placement,
                            lambda line: print(line, flush=True))
        if outcome.stop_signal is not None:
            return outcome.exit_status()
        status = max(status, outcome.exit_status())
        rows += [{"fleet": run.arm, "seed": run.seed, **figures(summary)}
                 for run, summary in finished_runs(plan, args.out / folder)]
    digests = {r["fleet"]: r["summary_digest"] for r in rows if r["seed"] == args.seeds[0]}
    repeats = digests.get("local") == digests.get("again") is not None
    rows = [r for r in rows if r["fleet"] != "again"]
    print(f"{'seed':>4} {'fleet':>6} {'final score':>12} {'random':>8} {'env steps/s':>12} "
          f"{'setup s':>8}")
    for r in rows:
        print(f"{r['seed']:>4} {r['fleet']:>6} {r['final_score']:>12.1f} {r['random_score']:>8.1f} "
              f"{r['env_steps_per_s']:>12,.0f} {r['setup_seconds']:>8.1f}")
    by = {f: [r for r in rows if r["fleet"] == f] for f in ("ray", "local")}
    paired = paired_difference(*({r["seed"]: r["final_score"] for r in by[f]}
                                 for f in ("ray", "local")))
    diffs = [] if paired is None else paired.differences
    for fleet, rs in by.items():
        print(f"{fleet}: final score {fmt_mean_se([r['final_score'] for r in rs])}, env steps/s "
              f"{fmt_mean_se([r['env_steps_per_s'] for r in rs])}, start-up "
              f"{fmt_mean_se([r['setup_seconds'] for r in rs])} s (seeds "
              f"{[r['seed'] for r in rs]})")
    print(f"paired difference ray - local: {fmt_mean_se(diffs)}")
    print(f"in process, seed {args.seeds[0]} twice: summaries "
          f"{'identical' if repeats else 'DIFFER'}")
    return status


if __name__ == "__main__":
    raise SystemExit(exit_status(main))
