"""Does a member learn? Evaluation score against env steps on mpe2 speaker-listener (not a test).

Each (algorithm, seed) job trains one member with the single-process trainer of its family
(:func:`distmarl.reference.train_reference`) on ``simple_speaker_listener_v4`` (continuous actions,
25-step episodes, score summed over agents), evaluating every ``--eval-every`` env steps on 32
episodes (4 per sub-env of the 8-sub-env eval venv, seeded per run and per evaluation). Reported
per job: the evaluation history, the final score (mean of the last 3 evaluations), the env steps
at which the score first reached ``--target`` and the wall seconds; per algorithm: the mean final
score over seeds and how many seeds reached the target. A uniform random policy is scored in the
same run (~100 episodes, same scoring code).

Jobs run as separate processes (:func:`benchmarks.harness.run_all`), at most ``--workers`` (2)
at a time, each with one torch thread and ``os.nice(10)``; on Linux they end with the
benchmark's process, even when it is killed. ``--json`` stores each job's figures as it ends,
and a second call with the same file runs only the jobs it lacks.

    .venv/bin/python -m benchmarks.learning.learning --algos MADDPG MATD3 --seeds 0 1 2 \
        --steps 300000 --eval-every 10000 --json out.json [--set algorithm.hp.batch_size=256]

``--final-episodes N`` scores each trained member (and the baselines) on N fixed episodes (one
spread episode's score varies by about +-13, so 100 episodes leave a standard error of about 1.3
points per member, 1000 about 0.4); ``--save-dir DIR`` keeps the trained members, and
``--rescore DIR`` (same ``--config`` / ``--set``) scores them again without training. With two
or more ``--algos`` the report ends with the last one's fixed-episode score minus the first's,
seed by seed, its mean and standard error.

Target: MADDPG and MATD3 both reach -30 within 300k env steps on at least 2 of 3 seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import CONFIGS, ROOT
from benchmarks.harness import Results, Run, run_all
from distmarl.studies.stats import paired_difference as paired_scores

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"
TARGET = -30.0
FINAL_EVALS = 3  # final score = mean of the last 3 evaluations
#: The trained policies and the baselines are also scored on the same fixed ~100 episodes (the
#: training-time evaluations use 32 episodes; one episode's score varies by about +-60, so a
#: small evaluation can land on easy episodes: on 8 of them a standing-still policy once scored
#: -24 against its -66 mean).
BASELINE_EPISODES = 100
BASELINE_SEED = 12345
MIN_SEEDS_AT_TARGET = 2


def load(algo: str, config_path: str | Path | None = None, sets: Sequence[str] = ()) -> Any:
    from distmarl.config import load_config

    return load_config(config_path or CONFIG, [f"algorithm.name={algo}", *sets])


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


def score_policy(cfg: Any, policy: Any, episodes: int = BASELINE_EPISODES,
                 seed: int = BASELINE_SEED) -> dict[str, Any]:
    """Mean score of ``policy`` (anything with ``act(obs, explore)``) over at least ``episodes``
    episodes of fixed seeds, acting without exploration."""
    from distmarl.collect import evaluate
    from distmarl.factory import make_venv

    venv = make_venv(cfg.env, mode="sync", seed=seed)
    try:
        scores = evaluate(venv, policy, episodes=math.ceil(episodes / venv.num_envs), seed=seed)
    finally:
        venv.close()
    return {"mean": float(np.mean(scores)), "std": float(np.std(scores)), "episodes": len(scores)}


def final_score(history: Sequence[tuple[int, float]], last: int = FINAL_EVALS) -> float:
    return float(np.mean([score for _, score in history[-last:]])) if history else math.nan


def run_one(algo: str, seed: int, steps: int, eval_every: int,
            config_path: str | Path | None = None, sets: Sequence[str] = (),
            target: float = TARGET, log: bool = False,
            final_episodes: int = BASELINE_EPISODES,
            save_dir: str | Path | None = None) -> dict[str, Any]:
    """Train one member of ``algo`` for ``steps`` env steps; figures as plain JSON-able data.
    The trained member is scored on ``final_episodes`` fixed episodes and, with ``save_dir``,
    its ``state_dict()`` is saved there (``<algo>_seed<seed>.pt``, see :func:`rescore`)."""
    import torch

    from distmarl.reference import train_reference

    torch.set_num_threads(1)
    cfg = load(algo, config_path, sets)
    start = time.perf_counter()
    with contextlib.redirect_stdout(_Prefixed(f"{algo} seed {seed}: ")) if log \
            else contextlib.nullcontext():
        result = train_reference(cfg, steps, seed, eval_every, log)
    wall = time.perf_counter() - start
    history = [(int(s), float(score)) for s, score in result.history]
    final_eval = score_policy(cfg, result.algo, final_episodes)
    saved = None if not save_dir else \
        save_member(result.algo, save_dir, cfg.algorithm.name, seed)
    return {"algo": cfg.algorithm.name, "seed": seed, "steps": int(result.env_steps),
            "sets": list(sets), "updates": int(result.updates),
            "history": history, "final_score": final_score(history),
            "final_eval": final_eval,
            "steps_to_target": steps_to(history, target),
            "steps_to_target_smoothed": steps_to_smoothed(history, target), "target": target,
            "wall_seconds": wall, "saved": saved}


def save_member(algo: Any, save_dir: str | Path, name: str, seed: int) -> str:
    """``algo.state_dict()`` to ``save_dir/<name>_seed<seed>.pt``; returns the path."""
    import torch

    path = Path(save_dir) / f"{name}_seed{seed}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"algorithm": name, "seed": seed, "state": algo.state_dict()}, path)
    return str(path)


def load_members(save_dir: str | Path, config_path: str | Path | None = None,
                 sets: Sequence[str] = ()) -> list[tuple[str, int, Any, Any]]:
    """Every member saved in ``save_dir`` (by ``--save-dir``), in file-name order:
    ``[(algo name, seed, config, algorithm with the saved state)]``. ``config_path`` and ``sets``
    must be those of the run that saved them."""
    import torch

    from distmarl.factory import env_spaces, make_algorithm

    paths = sorted(Path(save_dir).glob("*_seed*.pt"))
    if not paths:
        raise FileNotFoundError(f"no saved members (<algo>_seed<seed>.pt) in {save_dir}")
    out = []
    for path in paths:
        saved = torch.load(path, weights_only=False)
        cfg = load(saved["algorithm"], config_path, sets)
        algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=saved["seed"])
        algo.load_state_dict(saved["state"])
        out.append((saved["algorithm"], int(saved["seed"]), cfg, algo))
    return out


def rescore(save_dir: str | Path, config_path: str | Path | None = None,
            sets: Sequence[str] = (), episodes: int = BASELINE_EPISODES) -> list[dict[str, Any]]:
    """Score every member saved in ``save_dir`` (by ``--save-dir``) on ``episodes`` fixed
    episodes, without training: ``[{"algo", "seed", "final_eval"}]``. ``config_path`` and
    ``sets`` must be those of the run that saved them."""
    return [{"algo": name, "seed": seed, "final_eval": score_policy(cfg, algo, episodes)}
            for name, seed, cfg, algo in load_members(save_dir, config_path, sets)]


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


class _Prefixed:
    """A stdout that starts each line with ``prefix`` (jobs running side by side log to one
    terminal)."""

    def __init__(self, prefix: str) -> None:
        self.prefix, self.out, self.at_line_start = prefix, sys.__stdout__, True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            if self.at_line_start:
                self.out.write(self.prefix)
            self.out.write(piece)
            self.at_line_start = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()


class StillPolicy:
    """The all-zero action where the action spaces allow it (in mpe2: no force, nobody moves)."""

    def __init__(self, action_spaces: dict[str, Any]) -> None:
        self.action_spaces = action_spaces

    def act(self, obs: dict[str, np.ndarray], explore: bool = False) -> dict[str, np.ndarray]:
        return {a: np.zeros((len(o), *self.action_spaces[a].shape), self.action_spaces[a].dtype)
                for a, o in obs.items()}


def baseline_scores(config_path: str | Path | None = None, sets: Sequence[str] = (),
                    episodes: int = BASELINE_EPISODES) -> dict[str, dict[str, Any]]:
    """Scores of a uniform random policy and (where zero is a valid action) of standing still,
    on the same episodes as the trained policies' final evaluation (the env overrides among
    ``sets`` apply)."""
    from gymnasium import spaces as gym_spaces

    from distmarl.collect import RandomPolicy
    from distmarl.config import load_config
    from distmarl.factory import env_spaces

    # the config's own algorithm: only its env is read (another algorithm's hyperparameter
    # names may not fit the config's)
    cfg = load_config(config_path or CONFIG, [s for s in sets if s.startswith("env.")])
    act_spaces = env_spaces(cfg.env)[1]
    out = {"random": score_policy(cfg, RandomPolicy(act_spaces, BASELINE_SEED), episodes)}
    if all(isinstance(sp, gym_spaces.Box) and sp.contains(np.zeros(sp.shape, sp.dtype))
           for sp in act_spaces.values()):
        out["still"] = score_policy(cfg, StillPolicy(act_spaces), episodes)
    return out


def measure(run: Run, log: bool = False, save_dir: str | Path | None = None
            ) -> dict[str, Any]:
    """:func:`run_one` of a harness run (labels ``algo``, ``max_steps``, ``eval_every``,
    ``target``, ``final_episodes``): the job a worker process does."""
    assert run.seed is not None
    return run_one(run.label("algo"), run.seed, run.label("max_steps"), run.label("eval_every"),
                   run.config, run.overrides, run.label("target"), log,
                   run.label("final_episodes"), save_dir)


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
                 baselines: dict[str, dict[str, Any]], steps: int) -> None:
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
    for name, b in baselines.items():
        print(f"{name} policy: {b['mean']:.1f} (std {b['std']:.1f}, {b['episodes']} episodes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["MADDPG", "MATD3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--config", default=None, help=f"default {CONFIG.relative_to(ROOT)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every job (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="jobs at a time")
    parser.add_argument("--json", default=None,
                        help="results file: each run stored as it ends; runs already there "
                             "are not run again")
    parser.add_argument("--quiet", action="store_true", help="no per-evaluation progress lines")
    parser.add_argument("--final-episodes", type=int, default=BASELINE_EPISODES,
                        help="fixed episodes scoring each trained member and the baselines")
    parser.add_argument("--save-dir", default=None,
                        help="save each trained member's state_dict here")
    parser.add_argument("--rescore", default=None, metavar="DIR",
                        help="no training: score the members saved in DIR (same --config/--set)")
    args = parser.parse_args()
    if args.final_episodes < 1:
        parser.error(f"--final-episodes must be >= 1, got {args.final_episodes}")

    os.nice(10)
    start = time.perf_counter()
    if args.rescore:
        scored = rescore(args.rescore, args.config, args.set, args.final_episodes)
        for r in scored:
            fe = r["final_eval"]
            print(f"{r['algo']:<10} seed {r['seed']:>3}: {fe['mean']:.2f} (std {fe['std']:.1f}, "
                  f"{fe['episodes']} episodes)")
        have = {r["algo"] for r in scored}
        print_paired(last_minus_first(scored, [a for a in args.algos if a in have]
                                      or sorted(have)))
        return
    baselines = baseline_scores(args.config, args.set, args.final_episodes)
    for name, b in baselines.items():
        print(f"{name} policy: {b['mean']:.1f} over {b['episodes']} episodes", flush=True)
    store = Results(Path(args.json) if args.json else None)
    runs = [Run.of(Path(args.config or CONFIG), s, args.set, algo=a, max_steps=args.steps,
                   eval_every=args.eval_every, target=TARGET,
                   final_episodes=args.final_episodes)
            for a in args.algos for s in args.seeds]

    def progress(r: dict[str, Any]) -> None:
        evals = " ".join(f"{score:.0f}" for _, score in r["history"])
        print(f"[{time.perf_counter() - start:6.0f} s] {r['algo']} seed {r['seed']}: final "
              f"{r['final_score']:.1f}, steps to {TARGET:.0f} {_fmt_steps(r['steps_to_target'])}, "
              f"{r['wall_seconds']:.0f} s; fixed-episode eval "
              f"{_fmt(r['final_eval'] and r['final_eval']['mean'])}; evals: {evals}", flush=True)

    job = functools.partial(measure, log=not args.quiet, save_dir=args.save_dir)
    results = run_all(runs, job, store, workers=args.workers, on_record=progress)
    summary = summarise(results)
    print_report(results, summary, baselines, args.steps)
    paired = last_minus_first(results, args.algos)
    print_paired(paired)
    total = time.perf_counter() - start
    print(f"total wall time {total:.0f} s")
    store.save(steps=args.steps, eval_every=args.eval_every, sets=args.set,
               config=str(args.config or CONFIG), baselines=baselines, summary=summary,
               paired=paired, wall_seconds=total)


if __name__ == "__main__":
    main()
