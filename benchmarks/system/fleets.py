"""The main job on Ray and in one process: the same result, and each one's speed.

    .venv/bin/python -m benchmarks.system.fleets [--seeds 0 1 2] [--set key=value ...] [--json PATH]

Runs examples/configs/speaker_listener_maddpg.yaml (the README's main job) once per seed on a
local Ray and once with ``--local`` (the whole population in this process), then prints, per
seed and as a mean with its standard error: the elite's final score on the fixed episodes,
random play's, the paired difference (Ray - in process), population env steps/s over the
training time and the start-up seconds. A second in-process run of the first seed checks that
the summary repeats exactly (clocks, paths and tracking ids aside). ``--json`` stores each run
as it ends (:mod:`benchmarks.harness`); a second call with the same file runs only what it
lacks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS
from benchmarks.harness import Results, Run, run_all, train_in_process, train_seconds
from distmarl.studies.stats import fmt_mean_se, paired_difference

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"
#: summary keys that differ between two runs of one seed: clocks, paths and tracking ids
UNREPEATABLE = {"wall_seconds", "setup_seconds", "setup_phases", "env_steps_per_s", "run_dir",
                "checkpoint", "mlflow", "elite_model_uri", "generation_marks", "tracking",
                "ray", "stop_signal"}


def measure(run: Run) -> dict[str, Any]:
    """One run of the main job (label ``fleet``: ``ray`` or ``local``); its figures and a
    digest of the summary's repeatable part (two runs repeat exactly when the digests agree)."""
    summary = train_in_process(run.config, run.sets, local=run.label("fleet") == "local")
    repeatable = {k: v for k, v in summary.items() if k not in UNREPEATABLE}
    digest = hashlib.sha256(json.dumps(repeatable, sort_keys=True, default=str).encode())
    return {"final_score": summary["final_score"], "random_score": summary["random_score"],
            "env_steps_per_s": summary["env_steps"] / train_seconds(summary),
            "setup_seconds": summary["setup_seconds"], "summary_digest": digest.hexdigest()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value of every run")
    parser.add_argument("--json", type=Path, help="results file: each run stored as it ends; "
                                                  "runs already there are not run again")
    args = parser.parse_args()
    store = Results(args.json)
    runs = [Run.of(CONFIG, seed, args.set, fleet=fleet)
            for seed in args.seeds for fleet in ("ray", "local")]
    again = Run.of(CONFIG, args.seeds[0], args.set, fleet="local", repeat=2)
    *rows, second = run_all([*runs, again], measure, store)
    first = next(r for r in rows if r["fleet"] == "local" and r["seed"] == args.seeds[0])
    repeats = first["summary_digest"] == second["summary_digest"]
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
              f"{fmt_mean_se([r['setup_seconds'] for r in rs])} s (seeds {args.seeds})")
    print(f"paired difference ray - local: {fmt_mean_se(diffs)}")
    print(f"in process, seed {args.seeds[0]} twice: summaries "
          f"{'identical' if repeats else 'DIFFER'}")
    store.save(paired_difference=diffs, local_repeats=repeats)


if __name__ == "__main__":
    main()
