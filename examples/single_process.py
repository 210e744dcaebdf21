"""The single-process reference trainer: one member, one process, top to bottom (CleanRL style).

It uses the same parts as the distributed runtime (vectorised env, Collector, replay buffer,
algorithm) with no Ray, and counts updates the same way: one update per ``learn_step`` new
transitions once ``learning_starts`` rows are stored. It is the baseline the runtime is checked
against.

    .venv/bin/python examples/single_process.py examples/configs/speaker_listener_maddpg.yaml \
        --steps 50000 [--set algorithm.name=MATD3]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.tensors import to_torch
from distmarl.collect import Collector, progress_score
from distmarl.config import ExperimentConfig, load_config
from distmarl.factory import buffer_kwargs, env_spaces, make_algorithm, make_venv
from distmarl.types import OFF_POLICY_FIELDS


def train_member(cfg: ExperimentConfig, steps: int, seed: int, eval_every: int = 0,
                 log: bool = True) -> dict[str, Any]:
    """Train one member for ``steps`` env steps; returns figures and evaluation history."""
    import torch

    torch.set_num_threads(1)
    spaces = env_spaces(cfg.env)
    algo = make_algorithm(cfg.algorithm, spaces, seed=seed)
    venv = make_venv(cfg.env, seed=seed)
    eval_venv = make_venv(cfg.env, mode="sync", seed=seed + 1)
    buffer = MultiAgentReplayBuffer(**{**buffer_kwargs(cfg, list(spaces[0])), "seed": seed})
    collector = Collector(venv, algo, seed=seed)
    owed, updates, done, next_eval = 0.0, 0, 0, eval_every
    history: list[tuple[int, float]] = []
    learn_time, start = 0.0, time.perf_counter()
    while done < steps:
        rollout = collector.collect(1)  # one vectorised step: num_envs transitions
        buffer.add(rollout.data)
        done += rollout.env_steps
        if len(buffer) >= cfg.buffer.learning_starts and done > cfg.training.learning_delay:
            owed += rollout.env_steps / algo.hp["learn_step"]
        t = time.perf_counter()
        while owed >= 1:
            batch = buffer.sample_numpy(int(algo.hp["batch_size"]))
            algo.learn(to_torch(dict(zip(OFF_POLICY_FIELDS, batch.data))))
            owed -= 1
            updates += 1
        learn_time += time.perf_counter() - t
        if eval_every and done >= next_eval:
            score = progress_score(eval_venv, algo, seed, done)
            history.append((done, score))
            next_eval += eval_every
            if log:
                print(f"{done:>8} env steps  {done / (time.perf_counter() - start):7.0f}/s  "
                      f"updates {updates:>6}  eval score {score:7.1f}", flush=True)
    wall = time.perf_counter() - start
    venv.close()
    eval_venv.close()
    return {"env_steps": done, "updates": updates, "wall_seconds": wall,
            "env_steps_per_s": done / wall, "learn_seconds": learn_time, "history": history,
            "algo": algo}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-every", type=int, default=5_000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    cfg = load_config(args.config, args.set)
    result = train_member(cfg, args.steps, args.seed, args.eval_every)
    print(f"done: {result['env_steps']} env steps, {result['updates']} updates in "
          f"{result['wall_seconds']:.1f} s ({result['env_steps_per_s']:.0f} env steps/s)")


if __name__ == "__main__":
    main()
