"""Does evolution earn its keep? An evolving population against the same population trained
without selection or mutation, and against one member, at the same total env steps.

Arms, per task and seed (``--arms``):

Every arm but ``per_nstep`` replays uniformly, one env step per row (off-policy tasks).

* ``evolving``: the task's config as it is (tournament selection and mutation);
* ``independent``: the same population and initial hyperparameters with ``evolution.mode:
  independent`` (members evaluated at the same boundaries, never selected, copied or mutated);
* ``single``: one member with the config's hyperparameters, ``population.size`` times the
  env steps per member (the same total), evaluated every ``population.size * evo_steps``;
* ``sampled``: the evolving population started from hyperparameters drawn from the
  ``hp_config`` ranges (``evolution.initial_hp: sampled``), not among the default arms;
* ``per_nstep``: the evolving population with prioritised replay (alpha 0.6, beta 0.4) and
  3-step rows (the buffer's default for MADDPG and MATD3), at the same update-to-data ratio
  (off-policy tasks; not among the defaults);
* ``mixed``: the evolving population as 2 MADDPG and 2 MATD3 members, and ``matd3``: all
  MATD3 (speaker-listener's config is MADDPG: ``evolving`` is the all-MADDPG arm);
* ``pbt``: 6 members with asynchronous exploit / explore (``evolution.mode: async``, one
  frequency), and ``mf_pbt``: 6 members in multiple-frequencies PBT, 3 evolving every
  ``evo_steps`` and 3 every ``4 * evo_steps``, one slot of each open to migrants (a
  sub-population needs 3 members for a winner, an open slot and a loser); both at 1.5 times
  the other arms' total env steps;
* ``replay_0.25``, ``replay_0.5``, ``replay_0.75``: the evolving population with that fixed
  mix-in ``replay_ratio`` over uniform 1-step rows, and ``replay_evolved``: starting
  at 0.5, each member's ratio mutating within ``[0.05, 0.95]`` beside the config's other
  hyperparameters; ``replay_evolved_alone``: the same with the ratio the only one mutated
  (a hyperparameter mutation picks one of those searched, so among five the ratio moves
  rarely).

Every run ends with every member scored on the same fixed 100 episodes (the run's own final
evaluation, ``evolution.final_episodes``). Per arm the report gives the elite's final score (the
member ranked first by fitness) and the best member's, as mean and standard error over seeds;
the median env steps (over the whole population) and seconds of training until the best
fitness first reached the task's target (``never`` counts as not reached; the median is taken
over the seeds that reached it, with how many did); and the paired difference, seed by seed, of
``evolving``'s elite minus ``independent``'s best member, with its standard error.

Each task's runs are a sweep (:mod:`distmarl.studies.sweep`) in ``--out``/<task>, one run at a
time, each a ``distmarl train`` process with its own local Ray on every core; a second call
with the same ``--out`` skips the runs finished there (more arms and seeds extend it), and
``--report-only`` prints the report of every run it holds.

    .venv/bin/python -m benchmarks.learning.population_value [--out DIR] \
        [--tasks speaker_listener spread] [--seeds 0 1 2 3 4] [--arms evolving independent single]
        [--steps speaker_listener=60000 spread=150000]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, RUNS, exit_status, train_seconds
from distmarl.studies.plan import SweepPlan, folder_plan
from distmarl.studies.stats import fmt_mean_se, paired_difference
from distmarl.studies.sweep import finished_runs, run_sweep


@dataclass(frozen=True)
class Task:
    """A benchmark task: its config, the score it is timed to, and its default env steps per
    member (None: the config's)."""

    config: Path
    target: float
    steps: int | None = None


TASKS = {
    "speaker_listener": Task(CONFIGS / "speaker_listener_maddpg.yaml", -30.0, steps=60_000),
    "spread": Task(CONFIGS / "spread_mappo.yaml", -45.0, steps=150_000),
}
REPLAY_ARMS = {"replay_0.25": 0.25, "replay_0.5": 0.5, "replay_0.75": 0.75}
ARMS = ("evolving", "independent", "single", "sampled", "per_nstep", "mixed", "matd3",
        *REPLAY_ARMS, "replay_evolved", "replay_evolved_alone", "pbt", "mf_pbt")


#: every arm but ``per_nstep`` replays uniformly, one env step per row
UNIFORM = ["replay.prioritized_replay=false", "replay.n_step=1"]


def arm_overrides(arm: str, size: int, evo_steps: int, steps: int) -> list[str]:
    """``--set`` overrides that make ``arm`` from a config with ``size`` members,
    ``evo_steps`` and ``steps`` env steps per member."""
    if arm == "per_nstep":
        return [f"training.max_steps_per_member={steps}", "replay.prioritized_replay=true",
                "replay.n_step=3"]
    return [*_population_overrides(arm, size, evo_steps, steps), *UNIFORM]


def _population_overrides(arm: str, size: int, evo_steps: int, steps: int) -> list[str]:
    if arm == "evolving":
        return [f"training.max_steps_per_member={steps}"]
    if arm == "independent":
        return [f"training.max_steps_per_member={steps}", "evolution.mode=independent"]
    if arm == "single":
        return [f"training.max_steps_per_member={steps * size}", "population.size=1",
                "evolution.mode=independent",
                f"evolution.evo_steps={evo_steps * size}"]
    if arm == "sampled":
        return [f"training.max_steps_per_member={steps}", "evolution.initial_hp=sampled"]
    if arm == "mixed":
        half = size // 2
        return [f"training.max_steps_per_member={steps}",
                f"population.members=[{{algorithm: MADDPG, count: {size - half}}}, "
                f"{{algorithm: MATD3, count: {half}}}]"]
    if arm == "matd3":
        return [f"training.max_steps_per_member={steps}", "algorithm.name=MATD3"]
    if arm in REPLAY_ARMS:
        return [f"training.max_steps_per_member={steps}", f"replay.replay_ratio={REPLAY_ARMS[arm]}"]
    if arm == "pbt":
        return [f"training.max_steps_per_member={steps}", "population.size=6", "evolution.mode=async"]
    if arm == "mf_pbt":
        return [f"training.max_steps_per_member={steps}", "population.size=6",
                "evolution.mode=multi_frequency", "evolution.migration_frac=0.34",
                f"evolution.subpopulations=[{{size: 3, evo_steps: {evo_steps}}}, "
                f"{{size: 3, evo_steps: {4 * evo_steps}}}]"]
    if arm == "replay_evolved":
        return [f"training.max_steps_per_member={steps}", "replay.replay_ratio=0.5",
                "evolution.hp_config.replay_ratio={min: 0.05, max: 0.95}"]
    if arm == "replay_evolved_alone":
        return [f"training.max_steps_per_member={steps}", "replay.replay_ratio=0.5",
                "evolution.hp_config={replay_ratio: {min: 0.05, max: 0.95}}"]
    raise ValueError(f"unknown arm {arm!r} (one of {', '.join(ARMS)})")


def to_target(summary: dict[str, Any], target: float, evo_steps: int
              ) -> tuple[int | None, float | None]:
    """Total env steps and seconds of training when the best fitness first reached ``target``
    (None, None when it never did): at a generation's end, or, where members evolve on their
    own (``evolution.mode: async`` records no generations), at the first member evaluation
    that reached it, the ``k``-th at ``k * evo_steps`` of the member's own env steps, times the
    population size (members advance alike; seconds are not recorded there: None)."""
    if not summary["generation_marks"]:
        fitness = [m["fitness"] for m in summary["members"]]
        for k in range(max(map(len, fitness), default=0)):
            if max(f[k] for f in fitness if len(f) > k) >= target:
                return (k + 1) * evo_steps * len(fitness), None
        return None, None
    for best, (seconds, steps) in zip((max(f) for f in summary["fitness_history"]),
                                      summary["generation_marks"]):
        if best >= target:
            return int(steps), float(seconds)
    return None, None


def task_plan(task_name: str, arms: Sequence[str], seeds: Sequence[int], steps: int | None
              ) -> SweepPlan:
    """The sweep of ``arms`` on ``task_name`` at ``seeds`` (``steps``: env steps per member
    of the population arms; None: the task's, else the config's)."""
    from distmarl.config import load_config

    task = TASKS[task_name]
    cfg = load_config(task.config)
    per_member = steps or task.steps or cfg.training.max_steps_per_member
    return SweepPlan.of(task.config, seeds, {
        arm: arm_overrides(arm, cfg.population.size, cfg.evolution.evo_steps, per_member)
        for arm in arms}, ["tracking.mlflow=false", "training.target=null"])


def figures(task_name: str, summary: dict[str, Any]) -> dict[str, Any]:
    """One run's figures, from its summary."""
    from distmarl.config import load_config

    task = TASKS[task_name]
    evo_steps = load_config(task.config).evolution.evo_steps
    reached_steps, reached_s = to_target(summary, task.target, evo_steps)
    return {"env_steps": summary["env_steps"], "wall_seconds": summary["wall_seconds"],
            "train_seconds": train_seconds(summary),
            "final_score": summary["final_score"],
            "best_member_score": max(summary["final_scores"]),
            "final_scores": summary["final_scores"], "random_score": summary["random_score"],
            "steps_to_target": reached_steps, "seconds_to_target": reached_s,
            "hp": [m["hp"] for m in summary["members"]],
            "fitness_history": summary["fitness_history"],
            "member_fitness": [m["fitness"] for m in summary["members"]]}


def median_or_never(xs: Sequence[float | None], unit: str, recorded: bool = True) -> str:
    """The median over the values reached, with how many of ``xs`` did; ``-`` where the runs
    do not record the figure (``recorded`` false)."""
    if not recorded:
        return "-"
    got = [x for x in xs if x is not None]
    if not got:
        return f"never (0/{len(xs)})"
    return f"{statistics.median(got):,.0f}{unit} ({len(got)}/{len(xs)})"


def timed(runs: Sequence[dict[str, Any]]) -> bool:
    """Whether ``runs`` record seconds to the target: not where one reached it untimed (runs
    without generations)."""
    return not any(r["steps_to_target"] is not None and r["seconds_to_target"] is None
                   for r in runs)


def report(results: list[dict[str, Any]]) -> list[str]:
    """The table rows and verdict lines of ``results`` (markdown)."""
    lines = ["| task | arm | seeds | elite final score | best member | env steps to target "
             "| seconds to target | random play |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = []
    for task in dict.fromkeys(r["task"] for r in results):
        by_arm = {a: sorted((r for r in results if r["task"] == task and r["arm"] == a),
                            key=lambda r: r["seed"]) for a in ARMS}
        for arm, rs in by_arm.items():
            if rs:
                lines.append(
                    f"| {task} | {arm} | {','.join(str(r['seed']) for r in rs)} "
                    f"| {fmt_mean_se([r['final_score'] for r in rs])} "
                    f"| {fmt_mean_se([r['best_member_score'] for r in rs])} "
                    f"| {median_or_never([r['steps_to_target'] for r in rs], '')} "
                    f"| {median_or_never([r['seconds_to_target'] for r in rs], ' s', timed(rs))} "
                    f"| {fmt_mean_se([r['random_score'] for r in rs])} |")
        verdicts += paired(task, by_arm)
    return [*lines, "", *verdicts]


def best_fixed_replay(by_arm: dict[str, list[dict[str, Any]]]) -> str | None:
    """The fixed-``replay_ratio`` arm with the best mean elite score (None before any ran)."""
    ran = {a: statistics.fmean(r["final_score"] for r in by_arm[a])
           for a in REPLAY_ARMS if by_arm.get(a)}
    return max(ran, key=lambda a: ran[a]) if ran else None


def paired(task: str, by_arm: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The paired differences over the seeds both arms ran: ``evolving`` against
    ``independent``, each variant against the arm it changes, and each evolved ``replay_ratio``
    arm against the best fixed one (with both arms' env steps to the target)."""
    out = []
    pairs = [("evolving", "final_score", "independent", "best_member_score"),
             ("evolving", "final_score", "independent", "final_score"),
             ("sampled", "final_score", "evolving", "final_score"),
             ("per_nstep", "final_score", "evolving", "final_score"),
             ("mixed", "final_score", "evolving", "final_score"),
             ("mixed", "final_score", "matd3", "final_score"),
             ("mf_pbt", "final_score", "pbt", "final_score")]
    best = best_fixed_replay(by_arm)
    for evolved in ("replay_evolved", "replay_evolved_alone"):
        if best is None or not by_arm[evolved]:
            continue
        pairs.append((evolved, "final_score", best, "final_score"))
        out.append(f"- {task}: env steps to target per seed, {evolved} / {best} (best "
                   f"fixed ratio): " + ", ".join(
                       f"{r['seed']}: {r['steps_to_target'] or 'never'} / "
                       f"{s['steps_to_target'] or 'never'}"
                       for r in by_arm[evolved] for s in by_arm[best]
                       if r["seed"] == s["seed"]))
    for a, a_key, b, b_key in pairs:
        d = paired_difference({r["seed"]: r[a_key] for r in by_arm[a]},
                              {r["seed"]: r[b_key] for r in by_arm[b]})
        if d is None or d.se is None:  # fewer than two seeds in common
            continue
        m, se = d.mean, d.se
        verdict = ("resolved: better" if m > 2 * se else "resolved: worse" if m < -2 * se
                   else "not resolved (within two standard errors)")
        what = {"best_member_score": "best member", "final_score": "elite"}
        out.append(f"- {task}: {a} elite minus {b} {what[b_key]}, seeds {d.seeds}: "
                   f"{m:+.2f} (standard error {se:.2f}); per seed "
                   f"{', '.join(f'{x:+.1f}' for x in d.differences)}: {verdict}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=["evolving", "independent", "single"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--steps", nargs="*", default=[], metavar="TASK=N",
                    help="env steps per member of a task's population arms (default: the "
                         "task's; the single arm gets population size times as many)")
    ap.add_argument("--out", type=Path, default=RUNS / "population_value",
                    help="the sweeps' folder (one per task): runs finished there are not run "
                         "again")
    ap.add_argument("--report-only", action="store_true",
                    help="print the report of every run --out holds for --tasks, training "
                         "nothing")
    args = ap.parse_args(argv)
    steps = {k: int(v) for k, v in (s.split("=", 1) for s in args.steps)}
    rows, status = [], 0
    for task in args.tasks:
        plan = task_plan(task, args.arms, args.seeds, steps.get(task))
        if args.report_only:
            plan = folder_plan(args.out / task)
        else:
            outcome = run_sweep(plan, args.out / task, say=lambda line: print(line, flush=True))
            if outcome.stop_signal is not None:
                return outcome.exit_status()
            status = max(status, outcome.exit_status())
        for run, summary in finished_runs(plan, args.out / task):
            r = {"task": task, "arm": run.arm, "seed": run.seed, **figures(task, summary)}
            rows.append(r)
            print(f"{task} {r['arm']} seed {r['seed']}: elite {r['final_score']:.1f}, best "
                  f"member {r['best_member_score']:.1f}, to target {r['steps_to_target']} "
                  f"steps, {r['wall_seconds']:.0f} s", flush=True)
    print("\n".join(report(rows)))
    return status


if __name__ == "__main__":
    raise SystemExit(exit_status(main))
