"""The main job on a local Ray against another version of distmarl's (a worktree of an earlier
commit): population env steps/s, paired by round.

Each run is a fresh ``distmarl`` process of one tree (``PYTHONPATH`` set to it, so Ray's
actors import the same tree), the main job (``examples/configs/speaker_listener_maddpg.yaml``)
shortened to ``--steps`` env steps per member without MLflow, its elite scored on
``--final-episodes`` fixed episodes, seed ``round``; the baseline's run first in each round, so
the machine's drift falls on both alike. Prints each run (with the calls its coordinator made
to the workers and learners per generation, by kind, and, where the tree counts it, where the
learners' time went) and, over the rounds, the mean ratio of env steps/s and the mean paired
difference of final scores, each with its standard error.

    .venv/bin/python -m benchmarks.system.main_job_against --baseline /path/to/worktree
        [--rounds 3] [--steps 20000] [--final-episodes 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.micro.against import ROOT
from distmarl.studies.stats import fmt_mean_se

#: one run in the tree at ``argv[1]``: one JSON line
PROBE = """
import json, sys, tempfile
from pathlib import Path
from distmarl.config import load_config
from distmarl.runtime.driver.trainer import train
tree, steps, seed, final = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sets = json.loads(sys.argv[5])
with tempfile.TemporaryDirectory() as tmp:
    cfg = load_config(tree / "examples/configs/speaker_listener_maddpg.yaml",
                      [f"tracking.directory={tmp}", "tracking.mlflow=false",
                       f"training.max_steps_per_member={steps}",
                       f"evolution.final_episodes={final}", f"seed={seed}", *sets])
    s = train(cfg, run_dir=Path(tmp) / "run", show_progress=False)
    print(json.dumps({"env_steps_per_s": s["env_steps_per_s"], "wall_seconds": s["wall_seconds"],
                      "setup_seconds": s["setup_seconds"], "final_score": s["final_score"],
                      "generations": s["generations"], "calls": s.get("calls", {}),
                      "time": s.get("time", {})}))
"""


def run(tree: Path, steps: int, seed: int, final_episodes: int,
        sets: tuple[str, ...] = ()) -> dict[str, float]:
    """One run of the main job in ``tree`` (``sets``: config overrides)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tree), str(steps), str(seed),
                          str(final_episodes), json.dumps(list(sets))],
                         capture_output=True, text=True, check=True, cwd=tree, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def per_generation(f: dict[str, Any]) -> str:
    """The coordinator's calls per generation, by kind."""
    g = max(1, int(f["generations"]))
    calls = ", ".join(f"{kind} {n / g:,.1f}" for kind, n in sorted(f["calls"].items()))
    return f"calls per generation: {calls or 'not counted'}"


def learner_time(f: dict[str, Any]) -> str:
    """Where the learners' time went, as the run reports it (where it does)."""
    t = f["time"].get("learner")
    if not t:
        return ""
    return (f"; learners busy {t['busy']:.0%} (updating {t['updating']:.0%}), waiting for "
            f"samples {t['waiting_data']:.0%}, for the coordinator "
            f"{t['waiting_coordinator']:.0%}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a worktree of another commit")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20_000, help="env steps per member")
    p.add_argument("--final-episodes", type=int, default=4)
    args = p.parse_args(argv)
    ratios, gaps = [], []
    for r in range(1, args.rounds + 1):
        figures = {}
        for side, tree in (("baseline", args.baseline.resolve()), ("this", ROOT)):
            f = figures[side] = run(tree, args.steps, r, args.final_episodes)
            print(f"round {r} {side}: {f['env_steps_per_s']:,.0f} env steps/s, start-up "
                  f"{f['setup_seconds']:.1f} s, final score {f['final_score']:.2f}; "
                  f"{per_generation(f)}{learner_time(f)}", flush=True)
        ratios.append(figures["this"]["env_steps_per_s"] / figures["baseline"]["env_steps_per_s"])
        gaps.append(figures["this"]["final_score"] - figures["baseline"]["final_score"])
    print(f"this / baseline: {fmt_mean_se(ratios, '.3f')} env steps/s; final score this - "
          f"baseline {fmt_mean_se(gaps, '.2f')} (rounds {args.rounds}, seeds 1-{args.rounds})")


if __name__ == "__main__":
    main()
