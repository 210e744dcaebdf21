"""Population env steps/s and learner updates/s of distmarl, against baselines in the same run.

    .venv/bin/python -m benchmarks.system.throughput [--steps 20000] [--workers 1 2] \
        [--skip-agilerl]
    .venv/bin/python -m benchmarks.system.throughput --time-to-target -30 --max-steps 150000 \
        [--set algorithm.hp.batch_size=256 ...]

Settings as AgileRL's MADDPG example: population 4, 8 sub-envs per member, learn_step 16,
batch 64 (examples/configs/speaker_listener_maddpg_agilerl.yaml). Prints, each measured in this run:
  * distmarl on a local Ray: population env steps/s and updates/s,
  * distmarl in process (``--local``: the same population without Ray, one call at a time),
  * the single-process trainer (distmarl.reference.train_off_policy) doing the same work
    (population x steps, same update-to-data ratio) in one process,
  * AgileRL's train_multi_agent_off_policy, when the `bench` extra is installed,
  * env steps/s against rollout workers per member (the scaling curve),
and with --time-to-target the wall seconds until the best member's evaluation score reaches the
target (distmarl, and AgileRL at its example settings unless --skip-agilerl), with each one's
best fitness per generation. ``--set`` changes distmarl's config only (AgileRL keeps its example
settings), e.g. to time distmarl at its recommended settings against AgileRL at its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS
from benchmarks.system.training import train_in_process, train_seconds

CONFIG = CONFIGS / "speaker_listener_maddpg_agilerl.yaml"


def run_distmarl(steps: int, workers: int = 1, target: float | None = None,
                 extra: list[str] | None = None, local: bool = False) -> dict[str, Any]:
    sets = [f"training.max_steps_per_member={steps}", f"population.workers_per_member={workers}",
            "tracking.checkpoint_interval=0", *(extra or [])]
    if target is not None:
        sets.append(f"training.target={target}")
    summary = train_in_process(CONFIG, sets, local=local)
    # Rates over the training time, without the actors' start-up (processes importing torch,
    # making envs), as AgileRL's wall time leaves out its set-up; the start-up is listed apart.
    wall, seconds = summary["wall_seconds"], train_seconds(summary)
    return {"env_steps": summary["env_steps"], "wall_seconds": seconds,
            "setup_seconds": summary["setup_seconds"],
            "env_steps_per_s": summary["env_steps"] / seconds,
            "env_steps_per_s_with_setup": summary["env_steps"] / wall,
            "updates_per_s": summary["updates"] / seconds,
            "best_fitness": summary["best_fitness"], "stop_reason": summary["stop_reason"],
            "best_fitness_history": best_fitness_history(summary),
            "final_hp": [m["hp"] for m in summary["members"]], "sets": sets}


def best_fitness_history(summary: dict[str, Any]) -> list[tuple[int, float]]:
    """``[(generation, best member fitness), ...]`` from a run summary's per-member fitness."""
    fits = [m["fitness"] for m in summary["members"]]
    return [(g, max(f[g] for f in fits if len(f) > g))
            for g in range(max((len(f) for f in fits), default=0))]


def run_reference(steps: int, population: int) -> dict[str, Any]:
    from distmarl.config import load_config
    from distmarl.reference import train_off_policy

    cfg = load_config(CONFIG)
    total, updates, wall = 0, 0, 0.0
    for member in range(population):  # the population trained one member after another
        r = train_off_policy(cfg, steps, seed=member, eval_every=0, log=False)
        total, updates, wall = total + r.env_steps, updates + r.updates, wall + r.wall_seconds
    return {"env_steps": total, "wall_seconds": wall, "env_steps_per_s": total / wall,
            "updates_per_s": updates / wall}


def run_agilerl(steps: int, population: int, target: float | None = None,
                seed: int = 0) -> dict[str, Any] | None:
    try:
        from benchmarks.baselines.agilerl_runner import agilerl_available, run_agilerl_maddpg
    except ImportError:
        return None
    if not agilerl_available():
        return None
    return run_agilerl_maddpg(steps * population, population=population, num_envs=8,
                              learn_step=16, batch_size=64, target=target, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per member")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2],
                        help="rollout workers per member for the scaling curve")
    parser.add_argument("--skip-agilerl", action="store_true")
    parser.add_argument("--time-to-target", type=float, default=None, metavar="SCORE")
    parser.add_argument("--max-steps", type=int, default=300_000, help="per member, with --time-to-target")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override distmarl's config (repeatable); AgileRL is not changed")
    parser.add_argument("--seed", type=int, default=None,
                        help="with --time-to-target: seed of both trainers, for repeated runs "
                             "(default: the config's seed for distmarl, 0 for AgileRL)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    population = 4
    out: dict[str, Any] = {}
    if args.time_to_target is not None:
        seed_set = [] if args.seed is None else [f"seed={args.seed}"]
        out["distmarl"] = run_distmarl(args.max_steps, target=args.time_to_target,
                                       extra=[*seed_set, *args.set])
        if not args.skip_agilerl:
            out["agilerl"] = run_agilerl(args.max_steps, population, target=args.time_to_target,
                                         seed=args.seed or 0)
    else:
        out["distmarl"] = run_distmarl(args.steps, extra=args.set)
        out["distmarl --local"] = run_distmarl(args.steps, extra=args.set, local=True)
        out["reference"] = run_reference(args.steps, population)
        if not args.skip_agilerl:
            out["agilerl"] = run_agilerl(args.steps, population)
        out["scaling"] = {w: run_distmarl(args.steps, workers=w, extra=args.set)
                          for w in args.workers}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    if args.time_to_target is None:
        report_throughput(out)
    else:
        report_target(out, args.time_to_target)


def report_throughput(out: dict[str, Any]) -> None:
    ours = out["distmarl"]["env_steps_per_s"]
    print("rates over training time; start-up (actors, envs) listed apart, as for AgileRL")
    print(f"{'run':<44} {'env steps/s':>12} {'updates/s':>10} {'setup s':>8}  distmarl is")
    for name in ("distmarl", "distmarl --local", "reference", "agilerl"):
        r = out.get(name)
        if r is None:
            print(f"{name:<44} {'(not installed: bash scripts/setup_env.sh dev,bench)':>12}")
            continue
        ups = r.get("updates_per_s")
        ratio = "" if name == "distmarl" else f"{ours / r['env_steps_per_s']:.2f}x"
        shown = "n/a" if ups is None else f"{ups:,.0f}"
        setup = r.get("setup_seconds")
        shown_setup = "-" if setup is None else f"{setup:.1f}"
        print(f"{name:<44} {r['env_steps_per_s']:>12,.0f} {shown:>10} {shown_setup:>8}  {ratio}")
    for w, r in out["scaling"].items():
        print(f"{f'distmarl, {w} rollout worker(s) per member':<44} {r['env_steps_per_s']:>12,.0f} "
              f"{r['updates_per_s']:>10,.0f} {r['setup_seconds']:>8.1f}")


def report_target(out: dict[str, Any], target: float) -> None:
    ours = out["distmarl"]
    print(f"distmarl: best fitness {ours['best_fitness']} ({ours['stop_reason']}) after "
          f"{ours['wall_seconds']:.0f} s (+{ours['setup_seconds']:.0f} s start-up), "
          f"{ours['env_steps']:,} population env steps")
    print("  best fitness per generation: "
          + " ".join(f"{f:.0f}" for _, f in ours["best_fitness_history"]))
    agile = out.get("agilerl")
    if agile:
        t = agile.get("time_to_target_s")
        print(f"agilerl: time to {target}: {t if t is None else f'{t:.0f} s'} "
              f"(+{agile['setup_seconds']:.0f} s set-up), {agile['env_steps']:,} population env "
              f"steps, {agile['updates']:,} updates")
        print("  best fitness per evolution step: "
              + " ".join(f"{f:.0f}" for _, _, f in agile["best_fitness_history"]))
        if t and ours["stop_reason"] == "target":
            print(f"distmarl is {t / ours['wall_seconds']:.2f}x faster to {target}")


if __name__ == "__main__":
    main()
