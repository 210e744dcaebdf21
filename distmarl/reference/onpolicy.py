"""The reference on-policy trainer (IPPO, MAPPO): one member in one process, top to bottom.

It uses the parts the distributed runtime uses (vectorised env, :class:`~distmarl.collect.Collector`,
algorithm) without Ray or a buffer: collect a fragment of ``learn_step`` vectorised steps with
the current policy, learn from it once, repeat. Every fragment is used by exactly one ``learn``
call, as an on-policy learner in the runtime consumes its own member's rows.
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np

from distmarl.algorithms import FragmentLearner
from distmarl.collect import Collector, fragment_to_batch, progress_score
from distmarl.config import ExperimentConfig
from distmarl.config.hparams import on_policy
from distmarl.factory import env_spaces, make_algorithm, make_venv
from distmarl.reference.result import ReferenceResult

#: IPPO on mpe2 ``simple_spread_v3`` (continuous actions, 25-step episodes): 8 sub-envs,
#: fragments of 128 steps (1024 transitions per agent); a config dict for
#: :func:`distmarl.config.config_from_dict`.
SPREAD_IPPO: dict[str, Any] = {
    "name": "spread_ippo",
    "seed": 0,
    "env": {"spec": "mpe2:simple_spread_v3",
            "kwargs": {"continuous_actions": True, "max_cycles": 25},
            "num_envs": 8, "vector_mode": "sync"},
    "algorithm": {"name": "IPPO",
                  "hp": {"learn_step": 128, "batch_size": 256, "lr": 3e-4},
                  "net_config": {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                                 "head_config": {"hidden_size": [64]}}},
}


def train_on_policy(cfg: ExperimentConfig, steps: int, seed: int | None = None,
                    eval_every: int = 0, log: bool = True) -> ReferenceResult:
    """Train one on-policy member of ``cfg`` for ``steps`` env steps (per agent: vectorised
    steps * ``env.num_envs``; the loop stops at the first fragment reaching it).

    ``seed`` (default ``cfg.seed``) seeds the algorithm and the env; the evaluation env takes
    ``seed + 1``. With ``eval_every`` > 0 the member is scored without exploration every
    ``eval_every`` env steps (:func:`progress_score`) and, with ``log``, a progress line is
    printed. ``train_scores`` holds one entry per fragment in which an episode ended. Torch
    runs on one thread, as in a learner actor."""
    import torch

    if not on_policy(cfg.algorithm.name):
        raise ValueError(f"algorithm.name: {cfg.algorithm.name} is off-policy; train it with "
                         "distmarl.reference.train_off_policy")
    seed = cfg.seed if seed is None else seed
    torch.set_num_threads(1)
    spaces = env_spaces(cfg.env)
    algo = cast(FragmentLearner, make_algorithm(cfg.algorithm, spaces, seed=seed))
    venv = make_venv(cfg.env, seed=seed, global_state=algo.spec.global_state)
    eval_venv = make_venv(cfg.env, mode="sync", seed=seed + 1)
    collector = Collector(venv, algo, seed=seed)
    updates, done, next_eval = 0, 0, eval_every
    history: list[tuple[int, float]] = []
    train_scores: list[tuple[int, float]] = []
    metrics: dict[str, float] = {}
    learn_time, start = 0.0, time.perf_counter()
    while done < steps:
        rollout = collector.collect(int(algo.hp["learn_step"]))  # one fragment, used once
        done += rollout.env_steps
        if rollout.episode_scores:
            train_scores.append((done, float(np.mean(rollout.episode_scores))))
        t = time.perf_counter()
        metrics = algo.learn(fragment_to_batch(rollout.data, venv.num_envs))
        learn_time += time.perf_counter() - t
        updates += 1
        if eval_every and done >= next_eval:
            score = progress_score(eval_venv, algo, seed, done)
            history.append((done, score))
            next_eval += eval_every
            if log:
                train = train_scores[-1][1] if train_scores else float("nan")
                print(f"{done:>8} env steps  {done / (time.perf_counter() - start):6.0f}/s  "
                      f"updates {updates:>5}  train score {train:7.1f}  eval score {score:7.1f}  "
                      f"approx_kl {metrics['approx_kl']:.4f}", flush=True)
    wall = time.perf_counter() - start
    venv.close()
    eval_venv.close()
    return ReferenceResult(env_steps=done, updates=updates, wall_seconds=wall,
                           learn_seconds=learn_time, algo=algo, history=history,
                           train_scores=train_scores, last_metrics=metrics)
