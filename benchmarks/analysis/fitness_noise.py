"""How often does a fitness evaluation rank two policies right? By episodes per evaluation, and
with every member playing the same episodes or each its own.

The policies are every member of every checkpoint a run kept (``--run DIR``: a run directory,
e.g. of ``distmarl train examples/configs/speaker_listener_maddpg.yaml``), so they span what
selection compares: members of one generation and of nearby ones. Each policy's true score is
its mean over ``--truth-episodes`` fixed episodes. Each is then evaluated ``--evals`` times
with 1, 2, 4 and 8 episodes per sub-env (the run's ``env.num_envs`` sub-envs). Drawing groups
of 4 policies, the benchmark prints per evaluation size: the fitness standard deviation, how
often the fitness orders a pair as their true scores do (pairs whose true scores differ by more
than 0.5), and the mean regret of picking the group's best by fitness (true best minus true
score of the pick), with ``shared`` episodes (one seed for the group, as the runtime evaluates
a generation) and ``own`` episodes (a seed per member).

    .venv/bin/python -m benchmarks.analysis.fitness_noise --run runs/<time>-speaker_listener_maddpg
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

GROUP = 4
DRAWS = 4000


def load_policies(run: Path) -> tuple[Any, list[Any]]:
    """The run's config and every member of every checkpoint in ``run/checkpoints``."""
    from distmarl.checkpoint import load_checkpoint
    from distmarl.config import ExperimentConfig
    from distmarl.factory import env_spaces, make_algorithm

    policies, cfg = [], None
    for path in sorted((run / "checkpoints").iterdir()):
        ckpt = load_checkpoint(path, with_buffer=False)
        cfg = ExperimentConfig.model_validate(ckpt.meta["config"])
        for member in ckpt.members:
            algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=0)
            algo.load_state_dict(member["algo"])
            policies.append(algo)
    if cfg is None or len(policies) < GROUP:
        raise SystemExit(f"--run {run}: needs checkpoints holding at least {GROUP} members")
    return cfg, policies


def ranking_quality(fit: np.ndarray, truth: np.ndarray, shared: bool,
                    rng: np.random.Generator) -> tuple[float, float]:
    """``fit[p, e]``: policy ``p``'s fitness in evaluation ``e`` (evaluation ``e`` plays the
    same episodes for every policy). Fraction of pairs ordered right and mean regret of the
    group's pick."""
    right, regret = [], []
    for _ in range(DRAWS):
        group = rng.choice(len(truth), size=GROUP, replace=False)
        evals = (np.full(GROUP, rng.integers(fit.shape[1])) if shared
                 else rng.choice(fit.shape[1], size=GROUP, replace=False))
        f = fit[group, evals]
        regret.append(truth[group].max() - truth[group[int(np.argmax(f))]])
        a, b = group[0], group[1]
        if abs(truth[a] - truth[b]) > 0.5:
            right.append((f[0] > f[1]) == (truth[a] > truth[b]))
    return float(np.mean(right)), float(np.mean(regret))


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from distmarl.collect import evaluate, fixed_scores
    from distmarl.factory import make_venv

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a run directory with checkpoints/")
    ap.add_argument("--evals", type=int, default=40, help="evaluations per policy")
    ap.add_argument("--truth-episodes", type=int, default=1000)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg, policies = load_policies(args.run)
    venv = make_venv(cfg.env, mode="sync", seed=0)
    n_envs, most = venv.num_envs, 8
    truth = np.array([np.mean(fixed_scores(venv, p, args.truth_episodes, 999_999))
                      for p in policies])
    scores = np.array([[evaluate(venv, p, episodes=most, seed=1000 + 97 * e)
                        for e in range(args.evals)] for p in policies])
    venv.close()
    print(f"{len(policies)} policies, true scores {np.round(np.sort(truth), 1).tolist()}; "
          f"one episode's score: standard deviation {scores.std(axis=2).mean():.1f}")
    print("| episodes per evaluation | fitness sd | episodes | pairs ordered right "
          "| regret of the pick |")
    print("| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for k in (1, 2, 4, 8):
        fit = scores[:, :, : k * n_envs].mean(axis=2)
        for shared in (False, True):
            right, regret = ranking_quality(fit, truth, shared, rng)
            print(f"| {k * n_envs} ({k} per sub-env) | {fit.std(axis=1).mean():.2f} "
                  f"| {'shared' if shared else 'own'} | {right:.3f} | {regret:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
