"""Replay buffer speed and memory, against a plain numpy ring measured in the same run.

    .venv/bin/python -m benchmarks.micro.buffer_bench [--quick] [--no-actor]

Shapes are speaker-listener's (obs 3 and 11, actions 3 and 5, two agents; fields obs, action,
reward, next_obs, done). Prints:
  * in-process add rows/s with 8-row and 1000-row batches,
  * add(8 rows) + sample(1024) calls/s and sampled rows/s (buffer of 100k rows, and 1M rows),
    and prioritised replay's add + sample(1024) + update_priorities calls/s,
  * bytes per stored transition at 1M capacity (RSS growth / raw bytes of the stored arrays),
  * through the ReplayBufferActor: sample(1024) calls/s summed over 4 concurrent readers (and
    prioritised batches, each call carrying the TD errors of the one before),
each with its ratio against the plain ring, and against AgileRL's ReplayBuffer and RLlib's
MultiAgentMixInReplayBuffer where the `bench` extra installed them.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.micro.timing import best_rate
from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.tensors import to_torch

AGENTS = ["speaker_0", "listener_0"]
FIELDS = ["obs", "action", "reward", "next_obs", "done"]
SHAPES = {
    "obs": {"speaker_0": (3,), "listener_0": (11,)},
    "action": {"speaker_0": (3,), "listener_0": (5,)},
    "reward": {"speaker_0": (), "listener_0": ()},
    "next_obs": {"speaker_0": (3,), "listener_0": (11,)},
    "done": {"speaker_0": (), "listener_0": ()},
}
DTYPES = {"done": np.bool_}


def make_step(n: int, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], ...]:
    """One vectorised step of ``n`` sub-envs, as positional save_to_memory arguments."""
    out = []
    for f in FIELDS:
        dtype = DTYPES.get(f, np.float32)
        out.append({a: rng.random((n, *SHAPES[f][a])).astype(dtype) for a in AGENTS})
    return tuple(out)


def raw_row_bytes() -> int:
    return sum(
        int(np.prod(SHAPES[f][a], dtype=np.int64)) * np.dtype(DTYPES.get(f, np.float32)).itemsize
        for f in FIELDS for a in AGENTS
    )


class PlainRing:
    """The baseline: preallocated arrays, one per (field, agent), slice writes, np.take reads."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.cols = [(fi, a) for fi, f in enumerate(FIELDS) for a in AGENTS]
        self.arrays = [np.zeros((capacity, *SHAPES[FIELDS[fi]][a]), DTYPES.get(FIELDS[fi], np.float32))
                       for fi, a in self.cols]
        self.counter = 0
        self.rng = np.random.default_rng(0)

    def add(self, step: tuple[dict[str, np.ndarray], ...]) -> None:
        n = len(step[0][AGENTS[0]])
        start = self.counter % self.capacity
        stop = start + n
        if stop <= self.capacity:
            for arr, (fi, a) in zip(self.arrays, self.cols):
                arr[start:stop] = step[fi][a]
        else:
            idx = np.arange(start, stop) % self.capacity
            for arr, (fi, a) in zip(self.arrays, self.cols):
                arr[idx] = step[fi][a]
        self.counter += n

    def sample(self, batch: int) -> list[np.ndarray]:
        size = min(self.counter, self.capacity)
        idx = self.rng.integers(0, size, batch)
        return [arr.take(idx, axis=0) for arr in self.arrays]


def rate(fn: Callable[[], Any], seconds: float) -> float:
    """Calls per second of ``fn`` (:func:`benchmarks.micro.timing.best_rate`, 25 calls per clock
    read)."""
    return best_rate(fn, seconds, batch=25)


def bench_add(seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for rows in (8, 1000):
        out |= _add_rates(rows, seconds)
    return out


def _add_rates(rows: int, seconds: float) -> dict[str, float]:
    step = make_step(rows, np.random.default_rng(0))
    ring = PlainRing(1_000_000)
    buf = MultiAgentReplayBuffer(1_000_000, FIELDS, AGENTS, seed=0)
    out = {
        f"plain add rows/s ({rows}-row batches)": rate(lambda: ring.add(step), seconds) * rows,
        f"distmarl add rows/s ({rows}-row batches)": rate(
            lambda: buf.save_to_memory(*step, is_vectorised=True), seconds) * rows,
    }
    return out | third_party_rates(rows, seconds)


def bench_add_sample(seconds: float, capacity: int, fill: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    big, step = make_step(1000, rng), make_step(8, rng)
    ring = PlainRing(capacity)
    buf = MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, seed=0, replay_ratio=0.5)
    for _ in range(fill // 1000):
        ring.add(big)
        buf.save_to_memory(*big, is_vectorised=True)
    buf.read(1024, "learner")

    def plain() -> None:
        ring.add(step)
        ring.sample(1024)

    def ours() -> None:
        buf.save_to_memory(*step, is_vectorised=True)
        to_torch(buf.read(1024, "learner").data)  # tensors as a learner gets them

    per = MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, seed=0, replay_ratio=0.5,
                                 prioritized={"alpha": 0.6, "beta": 0.4, "eps": 1e-6})
    for _ in range(fill // 1000):
        per.save_to_memory(*big, is_vectorised=True)
    td_errors = rng.random(1024)

    def prioritized() -> None:
        per.save_to_memory(*step, is_vectorised=True)
        batch = per.read(1024, "learner")
        per.update_priorities("learner", batch.indices, td_errors)

    label = f"{capacity // 1000}k rows"
    plain_rate = rate(plain, seconds)
    per_rate = rate(prioritized, seconds)
    return {
        f"plain add+sample(1024) calls/s ({label})": plain_rate,
        f"distmarl add+sample(1024) calls/s ({label})": rate(ours, seconds),
        f"prioritized add+sample(1024)+update calls/s ({label})": per_rate,
        f"prioritized+update / plain add+sample ({label})": per_rate / plain_rate,
        f"distmarl sampled rows/s ({label})": rate(lambda: buf.read(1024, "x"), seconds) * 1024,
        f"plain sampled rows/s ({label})": rate(lambda: ring.sample(1024), seconds) * 1024,
    }


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def bench_memory(capacity: int = 1_000_000) -> dict[str, float]:
    gc.collect()
    before = rss_bytes()
    buf = MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, seed=0)
    step = make_step(10_000, np.random.default_rng(2))
    for _ in range(capacity // 10_000):
        buf.save_to_memory(*step, is_vectorised=True)
    del step
    gc.collect()
    grown = rss_bytes() - before
    raw = raw_row_bytes()
    del buf
    gc.collect()
    return {
        "raw bytes per transition (stored arrays)": raw,
        "distmarl bytes per transition (1M capacity, RSS growth)": grown / capacity,
        "distmarl memory / raw bytes": grown / capacity / raw,
    }


def third_party_rates(rows: int, seconds: float) -> dict[str, float]:
    """AgileRL's and RLlib's buffers' add rows/s (benchmarks/baselines), where the `bench` extra
    installed them; each times the library's own packaging of the rows plus its add()."""
    out: dict[str, float] = {}
    try:
        from benchmarks.baselines.agilerl_runner import (
            agilerl_available,
            run_agilerl_buffer_add,
            run_rllib_buffer_add,
        )
    except ImportError as err:
        print(f"  (baselines skipped: {err})")
        return out
    if agilerl_available():
        out[f"agilerl add rows/s ({rows}-row batches)"] = run_agilerl_buffer_add(rows, seconds)
    try:
        out[f"rllib add rows/s ({rows}-row batches)"] = run_rllib_buffer_add(rows, seconds)
    except ImportError as err:
        print(f"  (RLlib baseline skipped: {err})")
    return out


def bench_actor(seconds: float) -> dict[str, float]:
    import ray

    from distmarl.buffers.wire import unpack_batches
    from distmarl.runtime.actors.buffer import make_buffer_actor
    from distmarl.runtime.driver.cluster import init_ray
    from distmarl.types import PriorityUpdate, ReadSpec, SampleRequest, TransitionChunk

    init_ray(num_cpus=2, dashboard=False)
    kwargs = {"memory_size": 100_000, "field_names": FIELDS, "agent_ids": AGENTS,
              "replay_ratio": 0.5, "seed": 0}
    buffer = make_buffer_actor(kwargs, num_cpus=0)
    prioritized = make_buffer_actor(
        {**kwargs, "prioritized": {"alpha": 0.6, "beta": 0.4, "eps": 1e-6}}, num_cpus=0)
    big = make_step(1000, np.random.default_rng(3))
    chunk = TransitionChunk(dict(zip(FIELDS, big)))
    ray.get([b.add.remote(chunk) for _ in range(50) for b in (buffer, prioritized)])

    @ray.remote(num_cpus=0)
    class Reader:
        def __init__(self, name: str) -> None:
            self.name = name

        def run(self, seconds: float, method: str, per_call: int) -> float:
            """Batches/s, keeping one request queued behind the one in service (a learner
            prefetches its next batch while it trains on the last). ``prioritized``: the
            prioritised buffer, packed, each call carrying TD errors for the batches of the
            one before it, as a learner's do."""
            target = prioritized if method == "prioritized" else buffer
            packed = method != "sample"
            call = target.sample_packed if packed else target.sample
            spec = ReadSpec.mixin(0.5)
            errors = np.random.default_rng(0).random(1024 * per_call)
            update = None

            def ask() -> Any:
                return call.remote([SampleRequest(self.name, 1024, per_call, spec, update)])

            refs, done_batches, start = [ask()], 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                refs.append(ask())
                [got] = ray.get(refs.pop(0))
                if packed:
                    got = unpack_batches(got)
                if method == "prioritized" and got:
                    idx = np.concatenate([b.indices for b in got])
                    update = PriorityUpdate(idx, errors[:len(idx)])
                done_batches += len(got)
            ray.get(refs)
            return done_batches / (time.perf_counter() - start)

    out = {}
    cases = {"actor sample(1024) calls/s, 4 readers": ("sample", 1),
             "actor sample_packed(1024) calls/s, 4 readers": ("sample_packed", 1),
             "actor batches of 1024/s, 4 readers, sample_packed 4 per call":
                 ("sample_packed", 4),
             "actor prioritized batches of 1024/s, 4 readers, 4 per call + priority updates":
                 ("prioritized", 4)}
    for key, (method, per_call) in cases.items():
        readers = [Reader.remote(f"reader-{i}") for i in range(4)]
        ray.get([r.run.remote(0.5, method, per_call) for r in readers])
        out[key] = sum(ray.get([r.run.remote(seconds, method, per_call) for r in readers]))
        for r in readers:
            ray.kill(r)
    ray.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short timings (smoke run)")
    parser.add_argument("--no-actor", action="store_true", help="skip the Ray actor part")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # as distmarl's learners: tiny tensor ops, no thread-pool stalls
    seconds = 0.3 if args.quick else 2.0
    results: dict[str, float] = {}
    results |= bench_memory()  # first, while the process holds no other large arrays
    results |= bench_add(seconds)
    results |= bench_add_sample(seconds, 100_000, 100_000)
    results |= bench_add_sample(seconds, 1_000_000, 1_000_000 if not args.quick else 200_000)
    if not args.no_actor:
        results |= bench_actor(seconds * 3)
    report(results)


def report(results: dict[str, float]) -> None:
    print(f"{'figure':<68} {'value':>14}  ratio")
    for key, value in results.items():
        ratio = ""
        if key.startswith("distmarl") and "/s" in key:
            rest = key.split(" ", 1)[1]
            ratios = [f"{value / results[f'{b} {rest}']:.2f}x {b}"
                      for b in ("plain", "agilerl", "rllib") if f"{b} {rest}" in results]
            ratio = ", ".join(ratios)
        shown = f"{value:>14,.1f}" if abs(value) >= 10 else f"{value:>14.2f}"
        print(f"{key:<68} {shown}  {ratio}")


if __name__ == "__main__":
    main()
