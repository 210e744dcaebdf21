"""Does a member learn? Evaluation score against env steps on mpe2 speaker-listener (not a test).

Each (algorithm, seed) run trains one member (``population.size=1``, evolution off) with
``distmarl train --local`` on ``simple_speaker_listener_v4`` (continuous actions, 25-step
episodes, score summed over agents), evaluating every ``--eval-every`` env steps on 32
episodes (4 per sub-env of the 8-sub-env eval venv). The runs are a sweep
(:mod:`distmarl.studies.sweep`) in ``--out``, an arm per algorithm, at most ``--workers`` (2)
at a time; a second call with the same folder trains only the runs it lacks. Reported per
run: the evaluation history, the final score (mean of the last 3 evaluations), the env steps
at which the score first reached the target (-30) and the wall seconds; per algorithm: the
mean final score over seeds and how many seeds reached the target.

Each trained member is also scored on ``--final-episodes`` fixed episodes (the run's own final
evaluation, ``evolution.final_episodes``: one spread episode's score varies by about +-13, so
100 episodes leave a standard error of about 1.3 points per member, 1000 about 0.4), beside a
uniform random policy (the run's) and, where zero is a valid action, standing still, on the
same episodes. ``--rescore`` scores every member ``--out`` holds again without training.
With two or more ``--algos`` the report ends with the last one's fixed-episode score minus the
first's, seed by seed, its mean and standard error.

    .venv/bin/python -m benchmarks.learning.learning --algos MADDPG MATD3 --seeds 0 1 2 \
        --steps 300000 --eval-every 10000 [--out DIR] [--set algorithm.hp.batch_size=256]

Target: MADDPG and MATD3 both reach -30 within 300k env steps on at least 2 of 3 seeds.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import CONFIGS, ROOT, RUNS, exit_status
from distmarl.studies.plan import SweepPlan, SweepRun, folder_plan
from distmarl.studies.runner import Placement
from distmarl.studies.stats import paired_difference as paired_scores
from distmarl.studies.sweep import finished_runs, run_sweep

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"
TARGET = -30.0
FINAL_EVALS = 3  # final score = mean of the last 3 evaluations
#: The trained members and the baselines are also scored on the same fixed 100 episodes (the
#: training-time evaluations use 32 episodes; one episode's score varies by about +-60, so a
#: small evaluation can land on easy episodes: on 8 of them a standing-still policy once scored
#: -24 against its -66 mean).
BASELINE_EPISODES = 100
MIN_SEEDS_AT_TARGET = 2


def plan(algos: Sequence[str], seeds: Sequence[int], steps: int, eval_every: int,
         final_episodes: int, config_path: str | Path | None = None,
         sets: Sequence[str] = ()) -> SweepPlan:
    """The sweep: one member per run, evaluated every ``eval_every`` env steps (its fitness
    history), ``steps`` env steps, ``final_episodes`` fixed episodes at the end; an arm per
    algorithm (its ``algorithm.name``, then the user's ``sets``)."""
    return SweepPlan.of(config_path or CONFIG, seeds,
                        {algo: [f"algorithm.name={algo}", *sets] for algo in algos},
                        ["tracking.mlflow=false", "population.size=1",
                         "evolution.mode=independent", f"evolution.evo_steps={eval_every}",
                         f"training.max_steps_per_member={steps}", "training.target=null",
                         f"evolution.final_episodes={final_episodes}"])


def steps_to(history: Sequence[tuple[int, float]], target: float) -> int | None:
    """Env steps of the first evaluation scoring ``target`` or more; None if none did."""
    return next((int(s) for s, score in history if score >= target), None)


def steps_to_smoothed(history: Sequence[tuple[int, float]], target: float,
                      window: int = FINAL_EVALS) -> int | None:
    """Env steps of the first evaluation where the mean of the last ``window`` evaluations
    reaches ``target``; None if it never does."""
    scores = [score for _, score in history]
    return next((int(history[i][0]) for i in range(window - 1, len(history))
                 if np.mean(scores[i - window + 1:i + 1]) >= target), None)


def final_score(history: Sequence[tuple[int, float]], last: int = FINAL_EVALS) -> float:
    return float(np.mean([score for _, score in history[-last:]])) if history else math.nan


def figures(run: SweepRun, summary: dict[str, Any], eval_every: int,
            target: float = TARGET) -> dict[str, Any]:
    """A finished run's figures, from its summary: the member's evaluations (one every
    ``eval_every`` env steps) against its env steps (as counted at each evaluation where the
    run recorded them), the final score, steps to ``target`` and its fixed-episode score."""
    fitness = summary["members"][0]["fitness"]
    marks = [int(steps) for _, steps in summary["generation_marks"]]
    if len(marks) != len(fitness):
        marks = [(k + 1) * eval_every for k in range(len(fitness))]
    history = [(steps, float(f)) for steps, f in zip(marks, fitness)]
    return {"algo": run.arm, "seed": run.seed, "steps": int(summary["env_steps"]),
            "history": history, "final_score": final_score(history),
            "final_eval": {"mean": summary["final_score"],
                           "episodes": summary["final_episodes"]},
            "random_eval": summary["random_score"],
            "steps_to_target": steps_to(history, target),
            "steps_to_target_smoothed": steps_to_smoothed(history, target), "target": target,
            "wall_seconds": summary["wall_seconds"]}


def fixed_score(cfg: Any, policy: Any, episodes: int, seed: int | None = None
                ) -> dict[str, Any]:
    """Mean score of ``policy`` (anything with ``act(obs, explore)``) over ``episodes`` fixed
    episodes, acting without exploration: the episodes of a run's final evaluation
    (``evolution.final_seed`` unless ``seed``)."""
    from distmarl.collect.evaluation import fixed_scores
    from distmarl.factory import make_venv

    seed = cfg.evolution.final_seed if seed is None else seed
    venv = make_venv(cfg.env, mode="sync", seed=seed)
    try:
        scores = fixed_scores(venv, policy, episodes, seed)
    finally:
        venv.close()
    return {"mean": float(np.mean(scores)), "std": float(np.std(scores)), "episodes": len(scores)}


def rescore(out: Path, episodes: int) -> list[dict[str, Any]]:
    """Score every finished member of the sweep in ``out`` on ``episodes`` fixed episodes,
    without training: ``[{"algo", "seed", "final_eval"}]``."""
    from distmarl.collect.evaluation import evaluate_checkpoint

    sweep = folder_plan(out)
    out_rows = []
    for run, _ in finished_runs(sweep, out):
        scored = evaluate_checkpoint(run.run_dir / "checkpoints", episodes)
        out_rows.append({"algo": run.arm, "seed": run.seed,
                         "final_eval": {"mean": scored["mean_score"], "std": scored["std_score"],
                                        "episodes": scored["episodes"]}})
    if not out_rows:
        raise FileNotFoundError(f"no finished runs in {out}")
    return out_rows


def paired_difference(results: Sequence[dict[str, Any]], first: str, second: str
                      ) -> dict[str, Any] | None:
    """``second`` minus ``first`` in fixed-episode final score, seed by seed over the seeds both
    ran: ``{"seeds", "differences", "mean", "se"}`` (``se``: standard error of the mean, None
    with one seed); None when they share no seed."""
    def scores(algo: str) -> dict[int, float]:
        return {r["seed"]: r["final_eval"]["mean"] for r in results
                if r["algo"] == algo and r.get("final_eval")}

    d = paired_scores(scores(second), scores(first))
    return None if d is None else {"seeds": d.seeds, "differences": d.differences,
                                   "mean": d.mean, "se": d.se}


def last_minus_first(results: Sequence[dict[str, Any]], algos: Sequence[str]
                     ) -> dict[str, Any] | None:
    """:func:`paired_difference` of the last of ``algos`` against the first, with ``"first"``
    and ``"second"`` naming them; None with fewer than two algorithms or no shared seed."""
    order = list(dict.fromkeys(algos))
    d = paired_difference(results, order[0], order[-1]) if len(order) > 1 else None
    return None if d is None else {"first": order[0], "second": order[-1], **d}


def print_paired(d: dict[str, Any] | None) -> None:
    """One line for a :func:`last_minus_first` result (nothing for None)."""
    if d is not None:
        se = "-" if d["se"] is None else f"{d['se']:.2f}"
        per = ", ".join(f"{x:+.1f}" for x in d["differences"])
        print(f"{d['second']} minus {d['first']}, fixed-episode eval, seeds {d['seeds']}: "
              f"mean {d['mean']:+.2f} (standard error {se}); per seed {per}")


class StillPolicy:
    """The all-zero action where the action spaces allow it (in mpe2: no force, nobody moves)."""

    def __init__(self, action_spaces: dict[str, Any]) -> None:
        self.action_spaces = action_spaces

    def act(self, obs: dict[str, np.ndarray], explore: bool = False) -> dict[str, np.ndarray]:
        return {a: np.zeros((len(o), *self.action_spaces[a].shape), self.action_spaces[a].dtype)
                for a, o in obs.items()}


def still_score(config_path: str | Path | None = None, sets: Sequence[str] = (),
                episodes: int = BASELINE_EPISODES) -> dict[str, Any] | None:
    """Standing still's score on the trained members' fixed episodes (the env overrides among
    ``sets`` apply); None where zero is not a valid action."""
    from gymnasium import spaces as gym_spaces

    from distmarl.config import load_config
    from distmarl.factory import env_spaces

    # the config's own algorithm: only its env is read (another algorithm's hyperparameter
    # names may not fit the config's)
    cfg = load_config(config_path or CONFIG, [s for s in sets if s.startswith("env.")])
    act_spaces = env_spaces(cfg.env)[1]
    if not all(isinstance(sp, gym_spaces.Box) and sp.contains(np.zeros(sp.shape, sp.dtype))
               for sp in act_spaces.values()):
        return None
    return fixed_score(cfg, StillPolicy(act_spaces), episodes)


def _fmt_steps(s: int | None) -> str:
    return "never" if s is None else str(s)


def summarise(results: list[dict[str, Any]], target: float = TARGET) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for algo in dict.fromkeys(r["algo"] for r in results):
        rs = [r for r in results if r["algo"] == algo]
        reached = sum(r["steps_to_target"] is not None for r in rs)
        smoothed = sum(r.get("steps_to_target_smoothed") is not None for r in rs)
        evals = [r["final_eval"]["mean"] for r in rs if r.get("final_eval")]
        out[algo] = {"seeds": len(rs), "mean_final_score": float(np.mean([r["final_score"] for r in rs])),
                     "mean_final_eval": float(np.mean(evals)) if evals else None,
                     "seeds_reaching_target": reached, "seeds_reaching_target_smoothed": smoothed,
                     "target": target, "target_met": reached >= min(MIN_SEEDS_AT_TARGET, len(rs))}
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def print_report(results: list[dict[str, Any]], summary: dict[str, dict[str, Any]],
                 still: dict[str, Any] | None, steps: int) -> None:
    t = f"{TARGET:.0f}"
    n_ep = next((r["final_eval"]["episodes"] for r in results if r.get("final_eval")), 0)
    print(f"\n{'algorithm':<10} {'seed':>4} {'final score':>12} {'steps to ' + t:>12} {'wall s':>8}"
          f"   | {'final, ' + str(n_ep) + ' ep':>14} {'steps to ' + t + ' (3-eval mean)':>26}")
    for r in sorted(results, key=lambda r: (r["algo"], r["seed"])):
        fe = r.get("final_eval")
        print(f"{r['algo']:<10} {r['seed']:>4} {r['final_score']:>12.1f} "
              f"{_fmt_steps(r['steps_to_target']):>12} {r['wall_seconds']:>8.0f}   | "
              f"{_fmt(fe and fe['mean']):>14} {_fmt_steps(r.get('steps_to_target_smoothed')):>26}")
    print()
    for algo, s in summary.items():
        n = s["seeds"]
        print(f"{algo:<10} mean final score {s['mean_final_score']:7.1f} over {n} seeds "
              f"(fixed-episode eval: {_fmt(s['mean_final_eval'])}); "
              f"reached {s['target']:.0f} on {s['seeds_reaching_target']}/{n} seeds within "
              f"{steps} env steps (target: >= {min(MIN_SEEDS_AT_TARGET, n)}) -> "
              f"{'MET' if s['target_met'] else 'MISSED'}; 3-eval mean reached it on "
              f"{s['seeds_reaching_target_smoothed']}/{n}")
    if results:
        print(f"random policy: {results[0]['random_eval']:.1f} on the same {n_ep} episodes")
    if still is not None:
        print(f"still policy: {still['mean']:.1f} (std {still['std']:.1f}, "
              f"{still['episodes']} episodes)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["MADDPG", "MATD3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--config", default=None, help=f"default {CONFIG.relative_to(ROOT)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every run (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="runs at a time")
    parser.add_argument("--out", type=Path, help="the sweep's folder: runs finished there are "
                        "not run again (default: runs/benchmarks/learning/<config name>)")
    parser.add_argument("--final-episodes", type=int, default=BASELINE_EPISODES,
                        help="fixed episodes scoring each trained member and the baselines")
    parser.add_argument("--rescore", action="store_true",
                        help="no training: score every member --out holds again on "
                             "--final-episodes episodes")
    args = parser.parse_args(argv)
    if args.final_episodes < 1:
        parser.error(f"--final-episodes must be >= 1, got {args.final_episodes}")
    if args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    start = time.perf_counter()
    args.out = args.out or RUNS / "learning" / Path(args.config or CONFIG).stem
    if args.rescore:
        scored = rescore(args.out, args.final_episodes)
        for r in scored:
            fe = r["final_eval"]
            print(f"{r['algo']:<10} seed {r['seed']:>3}: {fe['mean']:.2f} (std {fe['std']:.1f}, "
                  f"{fe['episodes']} episodes)")
        print_paired(last_minus_first(scored, [r["algo"] for r in scored]))
        return 0
    sweep = plan(args.algos, args.seeds, args.steps, args.eval_every, args.final_episodes,
                 args.config, args.set)
    outcome = run_sweep(sweep, args.out, Placement(local=True, parallel=args.workers),
                        lambda line: print(f"[{time.perf_counter() - start:6.0f} s] {line}",
                                           flush=True))
    results = [figures(run, summary, args.eval_every)
               for run, summary in finished_runs(sweep, args.out)]
    for r in results:
        evals = " ".join(f"{score:.0f}" for _, score in r["history"])
        print(f"{r['algo']} seed {r['seed']}: final {r['final_score']:.1f}, steps to "
              f"{TARGET:.0f} {_fmt_steps(r['steps_to_target'])}, {r['wall_seconds']:.0f} s; "
              f"fixed-episode eval {_fmt(r['final_eval']['mean'])}; evals: {evals}")
    print_report(results, summarise(results), still_score(args.config, args.set,
                                                          args.final_episodes), args.steps)
    print_paired(last_minus_first(results, args.algos))
    print(f"total wall time {time.perf_counter() - start:.0f} s")
    return outcome.exit_status()


if __name__ == "__main__":
    raise SystemExit(exit_status(main))
