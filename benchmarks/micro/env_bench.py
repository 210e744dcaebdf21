"""Env steps per second: VectorParallelEnv (sync / async; 1, 8, 32 sub-envs) vs a plain loop.

    .venv/bin/python -m benchmarks.micro.env_bench [--env mpe2:simple_spread_v3] [--seconds 1.5]

Every configuration runs in this one process, with random actions drawn up front (policy cost
excluded). "cores used" is measured, not assumed: CPU seconds of this process plus its worker
processes (from /proc) over the wall-clock seconds of the timed window. The figure of merit is
env steps/s per core used relative to the plain loop (target: >= 80% with >= 8 sub-envs). On a
shared machine the load drifts, so each configuration's windows alternate with windows of the
plain loop, and each ratio compares a window with the plain window just before it.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from distmarl.envs import EnvFactory, VectorParallelEnv, make_env

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) of this process and of ``pids`` (Linux /proc; else 0)."""
    total = time.process_time()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def timed(run: Callable[[], int], pids: list[int], seconds: float) -> tuple[float, float]:
    """Call ``run`` (returns env steps done) until ``seconds`` pass: (steps/s, cores used)."""
    steps = 0
    cpu0, t0 = cpu_seconds(pids), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += run()
    wall = time.perf_counter() - t0
    return steps / wall, (cpu_seconds(pids) - cpu0) / wall


class PlainLoop:
    """One env stepped in a plain Python loop: the reference."""

    def __init__(self, spec: str, kwargs: dict) -> None:
        self.env = make_env(spec, **kwargs)
        self.env.reset(seed=0)
        agents = self.env.possible_agents
        self.pool = [{a: self.env.action_space(a).sample() for a in agents} for _ in range(64)]
        self.k = 0
        self.pids: list[int] = []
        self.run()  # warm-up

    def run(self) -> int:
        for _ in range(100):
            self.env.step(self.pool[self.k % 64])
            self.k += 1
            if not self.env.agents:
                self.env.reset()
        return 100

    def close(self) -> None:
        self.env.close()


class VectorLoop:
    """A ``VectorParallelEnv`` stepped with pre-drawn batched actions."""

    def __init__(
        self, spec: str, kwargs: dict, mode: str, num_envs: int, workers: int | None = None
    ) -> None:
        fns = [EnvFactory(spec, **kwargs)] * num_envs
        if mode == "async" and workers is not None:
            workers = min(workers, num_envs)
        self.venv = VectorParallelEnv(fns, mode=mode, seed=0, num_workers=workers)
        self.venv.reset()
        space = self.venv.single_action_space
        self.pool = [
            {a: np.stack([space(a).sample() for _ in range(num_envs)]) for a in self.venv.agents}
            for _ in range(16)
        ]
        self.k = 0
        self.calls = max(1, 200 // num_envs)
        self.pids = self.venv.worker_pids
        self.run()  # warm-up

    def run(self) -> int:
        for _ in range(self.calls):
            self.venv.step(self.pool[self.k % 16])
            self.k += 1
        return self.calls * self.venv.num_envs

    def close(self) -> None:
        self.venv.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="mpe2:simple_spread_v3")
    parser.add_argument("--seconds", type=float, default=1.5, help="timed seconds per window")
    parser.add_argument("--repeats", type=int, default=3, help="windows per configuration")
    parser.add_argument("--continuous", action="store_true")
    parser.add_argument("--sizes", default="1,8,32")
    parser.add_argument("--workers", type=int, default=None, help="async worker processes")
    args = parser.parse_args()
    kwargs = {"max_cycles": 25, "continuous_actions": args.continuous}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"env {args.env} {kwargs}; {cores} cores available, load average {load:.2f}")
    print(
        f"each configuration: {args.repeats} windows of {args.seconds:.1f} s, each right after "
        "a window of the plain loop; medians shown"
    )
    plain = PlainLoop(args.env, kwargs)
    head = f"{'mode':<6} {'sub-envs':>8} {'workers':>7} {'steps/s':>9} {'cores used':>10}"
    print(f"{head} {'steps/s/core':>12} {'plain/core':>10} {'ratio':>7}")
    row = "{:<6} {:>8} {:>7} {:>9,.0f} {:>10.2f} {:>12,.0f} {:>10,.0f} {:>6.1f}%"
    plain_all: list[tuple[float, float]] = []
    for mode in ("sync", "async"):
        for n in (int(s) for s in args.sizes.split(",")):
            loop = VectorLoop(args.env, kwargs, mode, n, args.workers)
            got = []
            for _ in range(args.repeats):
                p_rate, p_cores = timed(plain.run, [], args.seconds)
                rate, used = timed(loop.run, loop.pids, args.seconds)
                plain_all.append((p_rate, p_cores))
                got.append((rate, used, rate / used, p_rate / p_cores))
            workers = loop.venv.num_workers if mode == "async" else "-"
            loop.close()
            rate, used, per_core, p_per_core = (float(np.median(c)) for c in zip(*got))
            ratio = float(np.median([g[2] / g[3] for g in got]))
            print(row.format(mode, n, workers, rate, used, per_core, p_per_core, 100 * ratio))
    p_rate = float(np.median([p[0] for p in plain_all]))
    p_used = float(np.median([p[1] for p in plain_all]))
    print(row.format("plain", 1, "-", p_rate, p_used, p_rate / p_used, p_rate / p_used, 100.0))
    plain.close()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average at the end {load:.2f}")


if __name__ == "__main__":
    main()
