"""The reference on-policy trainer (IPPO, MAPPO): one member in one process, top to bottom.

It uses the parts the distributed runtime uses (vectorised env, :class:`~distmarl.collect.Collector`,
algorithm) without Ray or a buffer: collect a fragment of ``learn_step`` vectorised steps with
the current policy, learn from it once, repeat. Every fragment is used by exactly one ``learn``
call, as an on-policy learner in the runtime consumes its own member's rows.
"""

from __future__ import annotations

import time
from typing import Any, cast

from distmarl.algorithms import FragmentLearner
from distmarl.collect import Collector, fragment_to_batch
from distmarl.config import ExperimentConfig
from distmarl.config.hparams import on_policy
from distmarl.factory import env_spaces, make_algorithm, make_venv
from distmarl.reference.result import Progress, ReferenceResult

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
    done = 0
    progress = Progress(eval_every)
    while done < steps:
        rollout = collector.collect(int(algo.hp["learn_step"]))  # one fragment, used once
        done += rollout.env_steps
        progress.collected(done, rollout.episode_scores)
        t = time.perf_counter()
        progress.metrics = algo.learn(fragment_to_batch(rollout.data, venv.num_envs))
        progress.learn_seconds += time.perf_counter() - t
        progress.updates += 1
        score = progress.evaluate_if_due(done, eval_venv, algo, seed)
        if score is not None and log:
            scores = progress.train_scores
            train = scores[-1][1] if scores else float("nan")
            print(f"{done:>8} env steps  {progress.rate(done):6.0f}/s  "
                  f"updates {progress.updates:>5}  train score {train:7.1f}  "
                  f"eval score {score:7.1f}  approx_kl {progress.metrics['approx_kl']:.4f}",
                  flush=True)
    result = progress.result(done, algo)
    venv.close()
    eval_venv.close()
    return result
