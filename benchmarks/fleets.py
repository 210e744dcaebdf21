"""The main job on Ray and in one process: the same result, and each one's speed.

    .venv/bin/python -m benchmarks.fleets [--seeds 0 1 2] [--set key=value ...] [--json PATH]

Runs examples/configs/speaker_listener_maddpg.yaml (the README's main job) once per seed on a
local Ray and once with ``--local`` (the whole population in this process), then prints, per
seed and as a mean with its standard error: the elite's final score on the fixed episodes,
random play's, the paired difference (Ray - in process), population env steps/s over the
training time and the start-up seconds. A second in-process run of the first seed checks that
the summary repeats exactly (clocks, paths and tracking ids aside).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "speaker_listener_maddpg.yaml"
#: summary keys that differ between two runs of one seed: clocks, paths and tracking ids
UNREPEATABLE = {"wall_seconds", "setup_seconds", "setup_phases", "env_steps_per_s", "run_dir",
                "checkpoint", "mlflow", "elite_model_uri", "generation_marks", "tracking",
                "ray", "stop_signal"}


def run(seed: int, local: bool, extra: Sequence[str]) -> dict[str, Any]:
    """One run of the main job; its figures and its whole summary."""
    from distmarl.config import load_config
    from distmarl.runtime.trainer import train

    sets = [f"seed={seed}", "tracking.mlflow=false", f"tracking.directory={tempfile.mkdtemp()}",
            *extra]
    summary = train(load_config(CONFIG, sets), show_progress=False, local=local)
    wall, setup = summary["wall_seconds"], summary["setup_seconds"]
    return {"seed": seed, "fleet": "local" if local else "ray",
            "final_score": summary["final_score"], "random_score": summary["random_score"],
            "env_steps_per_s": summary["env_steps"] / (wall - setup), "setup_seconds": setup,
            "summary": summary}


def mean_se(xs: Sequence[float]) -> str:
    m = statistics.fmean(xs)
    return f"{m:.1f}" if len(xs) < 2 else f"{m:.1f} +- {statistics.stdev(xs) / math.sqrt(len(xs)):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value of every run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = [run(seed, local, args.set) for seed in args.seeds for local in (False, True)]
    again = run(args.seeds[0], True, args.set)
    first = next(r for r in rows if r["fleet"] == "local" and r["seed"] == args.seeds[0])
    repeats = ({k: v for k, v in first["summary"].items() if k not in UNREPEATABLE}
               == {k: v for k, v in again["summary"].items() if k not in UNREPEATABLE})
    print(f"{'seed':>4} {'fleet':>6} {'final score':>12} {'random':>8} {'env steps/s':>12} "
          f"{'setup s':>8}")
    for r in rows:
        print(f"{r['seed']:>4} {r['fleet']:>6} {r['final_score']:>12.1f} {r['random_score']:>8.1f} "
              f"{r['env_steps_per_s']:>12,.0f} {r['setup_seconds']:>8.1f}")
    by = {f: [r for r in rows if r["fleet"] == f] for f in ("ray", "local")}
    diffs = [a["final_score"] - b["final_score"] for a, b in zip(by["ray"], by["local"])]
    for fleet, rs in by.items():
        print(f"{fleet}: final score {mean_se([r['final_score'] for r in rs])}, env steps/s "
              f"{mean_se([r['env_steps_per_s'] for r in rs])}, start-up "
              f"{mean_se([r['setup_seconds'] for r in rs])} s (seeds {args.seeds})")
    print(f"paired difference ray - local: {mean_se(diffs)}")
    print(f"in process, seed {args.seeds[0]} twice: summaries {'identical' if repeats else 'DIFFER'}")
    if args.json:
        args.json.write_text(json.dumps(
            {"rows": [{k: v for k, v in r.items() if k != "summary"} for r in rows],
             "paired_difference": diffs, "local_repeats": repeats}, indent=1))


if __name__ == "__main__":
    main()
