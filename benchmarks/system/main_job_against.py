"""The main job on a local Ray against another version of distmarl's (a worktree of an earlier
commit): population env steps/s, paired by round.

Each run is a fresh ``distmarl`` process of one tree (``PYTHONPATH`` set to it, so Ray's
actors import the same tree), the main job (``examples/configs/speaker_listener_maddpg.yaml``)
shortened to ``--steps`` env steps per member without MLflow, seed ``round``; the baseline's
run first in each round, so the machine's drift falls on both alike. Prints each run and the
mean ratio with its standard error over the rounds.

    .venv/bin/python -m benchmarks.system.main_job_against --baseline /path/to/worktree
        [--rounds 3] [--steps 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.micro.against import ROOT
from benchmarks.stats import fmt_mean_se

#: one run in the tree at ``argv[1]``: one JSON line
PROBE = """
import json, sys, tempfile
from pathlib import Path
from distmarl.config import load_config
from distmarl.runtime.driver.trainer import train
tree, steps, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    cfg = load_config(tree / "examples/configs/speaker_listener_maddpg.yaml",
                      [f"tracking.directory={tmp}", "tracking.mlflow=false",
                       f"training.max_steps_per_member={steps}", "evolution.final_episodes=4",
                       f"seed={seed}"])
    s = train(cfg, run_dir=Path(tmp) / "run", show_progress=False)
    print(json.dumps({"env_steps_per_s": s["env_steps_per_s"], "wall_seconds": s["wall_seconds"],
                      "setup_seconds": s["setup_seconds"], "final_score": s["final_score"]}))
"""


def run(tree: Path, steps: int, seed: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tree), str(steps), str(seed)],
                         capture_output=True, text=True, check=True, cwd=tree, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a worktree of another commit")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20_000, help="env steps per member")
    args = p.parse_args(argv)
    ratios = []
    for r in range(1, args.rounds + 1):
        figures = {}
        for side, tree in (("baseline", args.baseline.resolve()), ("this", ROOT)):
            figures[side] = run(tree, args.steps, r)
            print(f"round {r} {side}: {figures[side]['env_steps_per_s']:,.0f} env steps/s, "
                  f"start-up {figures[side]['setup_seconds']:.1f} s", flush=True)
        ratios.append(figures["this"]["env_steps_per_s"] / figures["baseline"]["env_steps_per_s"])
    print(f"this / baseline: {fmt_mean_se(ratios, '.3f')} (rounds {args.rounds}, seeds "
          f"1-{args.rounds})")


if __name__ == "__main__":
    main()
