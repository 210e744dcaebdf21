"""Learner updates per second for MADDPG and MATD3 on CPU or a GPU (not a test).

Shapes of mpe2 ``simple_speaker_listener_v4`` with continuous actions: observations 3 and 11,
Box(0, 1) actions 3 and 5. Each network: encoder 64 -> latent 64 -> head 64 (the two 64-wide
hidden layers of the usual "64-64" MLP, plus the head layer where critics take the actions in).
One update = one ``learn(batch)`` call: every critic, the actors (MATD3: every ``policy_freq``-th
call) and the soft target updates. On a GPU (``--device cuda``) the batch is on the GPU before
the timed calls, as a learner's sampled batch is, and the clock stops after the GPU finishes.

    .venv/bin/python -m benchmarks.micro.learner_speed [--threads 1] [--seconds 3] [--device cuda]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from gymnasium import spaces

from benchmarks.micro.member_groups import random_batch
from distmarl.algorithms import MADDPG, MATD3
from distmarl.algorithms.base import Algorithm

OBS = {"speaker_0": spaces.Box(-np.inf, np.inf, (3,), np.float32),
       "listener_0": spaces.Box(-np.inf, np.inf, (11,), np.float32)}
ACT = {"speaker_0": spaces.Box(0.0, 1.0, (3,), np.float32),
       "listener_0": spaces.Box(0.0, 1.0, (5,), np.float32)}
NET_CONFIG = {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
              "head_config": {"hidden_size": [64]}}


def make_batch(size: int, seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """A random batch in ``OFF_POLICY_FIELDS`` form, every row active."""
    return random_batch(OBS, ACT, size, torch.Generator().manual_seed(seed))


def updates_per_second(algo: Algorithm, batch: dict, seconds: float) -> float:
    """Mean rate over ``seconds`` of back-to-back ``learn`` calls, after 10 warm-up calls
    (on a GPU, until its queued work is done)."""
    sync = torch.cuda.synchronize if algo.device.type == "cuda" else (lambda: None)
    for _ in range(10):
        algo.learn(batch)
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        algo.learn(batch)
        count += 1
    sync()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    where = (torch.cuda.get_device_name(torch.device(args.device))
             if args.device.startswith("cuda") else "CPU")
    print(f"torch {torch.__version__}, {where}, {torch.get_num_threads()} thread(s); "
          f"net_config={NET_CONFIG}")
    print(f"{'algorithm':<8} {'batch':>6} {'updates/s':>10} {'ms/update':>10}")
    for cls in (MADDPG, MATD3):
        for size in (64, 1024):
            algo = cls(OBS, ACT, NET_CONFIG, device=args.device, seed=0)
            batch = {f: {a: t.to(algo.device) for a, t in d.items()}
                     for f, d in make_batch(size).items()}
            rate = updates_per_second(algo, batch, args.seconds)
            print(f"{cls.name:<8} {size:>6} {rate:>10.1f} {1000 / rate:>10.2f}")


if __name__ == "__main__":
    main()
