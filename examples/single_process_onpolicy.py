"""The single-process on-policy reference trainer (IPPO / MAPPO), top to bottom, CleanRL style.

One member, one process, the parts the distributed runtime uses (vectorised env,
Collector, algorithm) and no Ray or buffer: collect a fragment of ``learn_step``
vectorised steps with the current policy, learn from it once, repeat. Every fragment is used by
exactly one ``learn`` call, as an on-policy learner in the runtime consumes its member's rows.

    .venv/bin/python examples/single_process_onpolicy.py [config.yaml] --steps 200000 \
        [--set algorithm.name=MAPPO]

Without a config file it trains IPPO on mpe2 ``simple_spread_v3`` (continuous, 25-step
episodes), :data:`DEFAULT_CONFIG`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from distmarl.collect import Collector, fragment_to_batch, progress_score
from distmarl.config import ExperimentConfig, apply_overrides, config_from_dict, load_config
from distmarl.factory import env_spaces, make_algorithm, make_venv

#: IPPO on simple_spread: 8 sub-envs, fragments of 128 steps (1024 transitions per agent).
DEFAULT_CONFIG: dict[str, Any] = {
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


def train_member(cfg: ExperimentConfig, steps: int, seed: int, eval_every: int = 0,
                 log: bool = True) -> dict[str, Any]:
    """Train one on-policy member for ``steps`` env steps (transitions of one agent, i.e.
    vectorised steps * num_envs); returns figures, the evaluation history ``[(env_steps,
    mean eval score)]`` and the training episodes' scores ``[(env_steps, mean score)]``."""
    import torch

    torch.set_num_threads(1)
    spaces = env_spaces(cfg.env)
    algo = make_algorithm(cfg.algorithm, spaces, seed=seed)
    if not algo.on_policy:
        raise ValueError(f"{cfg.algorithm.name} is off-policy; use examples/single_process.py")
    venv = make_venv(cfg.env, seed=seed, record_state=algo.uses_state)
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
    return {"env_steps": done, "updates": updates, "wall_seconds": wall,
            "env_steps_per_s": done / wall, "learn_seconds": learn_time, "history": history,
            "train_scores": train_scores, "last_metrics": metrics, "algo": algo}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="YAML config (default: DEFAULT_CONFIG)")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.config:
        cfg = load_config(args.config, args.set)
    else:
        import copy

        cfg = config_from_dict(apply_overrides(copy.deepcopy(DEFAULT_CONFIG), args.set))
    result = train_member(cfg, args.steps, args.seed, args.eval_every)
    print(f"done: {result['env_steps']} env steps, {result['updates']} updates in "
          f"{result['wall_seconds']:.1f} s ({result['env_steps_per_s']:.0f} env steps/s, "
          f"{result['learn_seconds']:.1f} s learning)")


if __name__ == "__main__":
    main()
