"""Pixels: IPPO on pistonball from 64x64 grey frames stacked 4, distmarl against AgileRL.

    .venv/bin/python -m benchmarks.system.pixels [--steps 20000] [--seed 0] [--skip-agilerl]
        [--config examples/configs/pistonball_ippo.yaml] [--json pixels.json] [--env-only]

Both arms train a population of 2 on pistonball (20 pistons sharing one policy) preprocessed
by SuperSuit to 64x64 grey frames stacked 4 deep, with the same CNN, fragment length,
minibatch and epochs (the same update-to-data ratio), for the same population env steps, one
after the other on this machine:

* distmarl: ``examples/configs/pistonball_ippo.yaml`` through the real trainer (a local Ray,
  its learner, rollout-worker, buffer and coordinator actors; MLflow and the final evaluation
  off, which AgileRL does not do). A thread reads every actor's peak resident memory (Linux
  ``VmHWM``) every ``--interval-s``.
* AgileRL 2.58: :mod:`benchmarks.baselines.agilerl_ippo` in ``.venv-bench`` where it exists,
  else in this environment (the ``bench`` extra; its own
  ``train_multi_agent_on_policy``; one process trains the population, sub-envs in
  subprocesses).

Prints env steps/s of each and their ratio, the peak resident memory of each process, and the
buffer actor's against its capacity times the raw ``uint8`` bytes of one stored row (one
vectorised step of one sub-env: every agent's frames). Peak resident memory is Linux's
``VmHWM``, which counts the object-store pages an actor maps (fragments on their way in or
out); beside it, the largest sampled ``RssAnon + RssFile``, the actor's own memory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, ROOT

CONFIG = CONFIGS / "pistonball_ippo.yaml"
BENCH_PYTHON = ROOT / ".venv-bench" / "bin" / "python"
MIB = 1024 * 1024


class PeakSampler(threading.Thread):
    """Every ``interval_s``: the peak resident memory so far of each live actor of the Ray at
    GCS ``address``, kept by label (``learner#0``, ``worker#1``, ``buffer``, ...)."""

    def __init__(self, interval_s: float, address: str) -> None:
        super().__init__(daemon=True)
        self.interval_s, self.address = interval_s, address
        self.peaks: dict[str, float] = {}
        #: the largest sampled resident memory without shared pages (``RssAnon + RssFile``):
        #: object-store pages an actor maps (fragments in flight) are not its own
        self.private: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        from benchmarks.baselines.agilerl_ippo import peak_rss_mib, private_rss_mib
        from benchmarks.system.soak import Labels, actor_pids

        labels = Labels()
        while not self.done.wait(self.interval_s):
            try:
                pids = actor_pids(self.address)
            except Exception:  # the state API answers only once the dashboard is up
                continue
            for actor_id, (cls, pid) in pids.items():
                peak, private = peak_rss_mib(pid), private_rss_mib(pid)
                if peak is not None and private is not None:
                    name = labels(actor_id, cls)
                    self.peaks[name] = max(peak, self.peaks.get(name, 0.0))
                    self.private[name] = max(private, self.private.get(name, 0.0))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=30)


def row_bytes(cfg: Any) -> int:
    """Raw bytes of one stored row's observations: every agent's frame stack (``uint8``)."""
    import numpy as np

    from distmarl.factory import make_venv

    venv = make_venv(cfg.env, num_envs=1, mode="sync", seed=0)
    try:
        spaces = [venv.single_observation_space(a) for a in venv.possible_agents]
        return int(sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in spaces))
    finally:
        venv.close()


def run_distmarl(config: Path, steps: int, seed: int, interval_s: float) -> dict[str, Any]:
    """One training run of ``config`` for ``steps`` population env steps (``max_steps`` is per
    member) with every actor's peak memory."""
    import ray

    from distmarl.config import load_config
    from distmarl.runtime.driver.cluster import init_ray
    from distmarl.runtime.driver.trainer import train

    workdir = Path(tempfile.mkdtemp(prefix="distmarl-pixels-"))
    size = load_config(config, []).population.size
    cfg = load_config(config, [f"seed={seed}", f"training.max_steps_per_member={steps // size}",
                               f"tracking.directory={workdir}", "tracking.mlflow=false",
                               "evolution.final_episodes=0"])
    raw_row = row_bytes(cfg)
    init_ray(num_cpus=2, log_to_driver=False)
    sampler = PeakSampler(interval_s, ray.get_runtime_context().gcs_address)
    sampler.start()
    try:
        summary = train(cfg, show_progress=False)
    finally:
        sampler.stop()
        ray.shutdown()
    capacity = cfg.buffer.capacity
    peaks = dict(sorted(sampler.peaks.items()))
    private = dict(sorted(sampler.private.items()))
    return {
        "env_steps": summary["env_steps"], "wall_seconds": summary["wall_seconds"],
        "setup_seconds": summary["setup_seconds"],
        "env_steps_per_s": summary["env_steps_per_s"], "updates": summary["updates"],
        "peak_rss_mib": peaks, "private_rss_mib": private,
        "buffer": {"capacity_rows": capacity, "row_bytes": raw_row,
                   "capacity_mib": capacity * raw_row / MIB,
                   "rss_over_capacity": (peaks.get("buffer", float("nan")) * MIB
                                         / (capacity * raw_row)),
                   "private_over_capacity": (private.get("buffer", float("nan")) * MIB
                                             / (capacity * raw_row))},
    }


def bench_python() -> Path | None:
    """The Python to run AgileRL with: ``.venv-bench``'s (``DISTMARL_VENV=.venv-bench bash
    scripts/setup_env.sh dev,bench``), else this one if it has AgileRL."""
    if BENCH_PYTHON.exists():
        return BENCH_PYTHON
    return Path(sys.executable) if importlib.util.find_spec("agilerl") is not None else None


def run_agilerl(cfg_path: Path, steps: int, seed: int) -> dict[str, Any] | None:
    """The AgileRL arm with the config's settings, in ``.venv-bench`` where there is one, else
    in this environment; None where neither has AgileRL."""
    python = bench_python()
    if python is None:
        print("AgileRL is not installed (bash scripts/setup_env.sh dev,bench): its arm is "
              "skipped", file=sys.stderr)
        return None
    from distmarl.config import load_config

    cfg = load_config(cfg_path, [])
    hp = cfg.algorithm.hp
    out = Path(tempfile.mkdtemp(prefix="agilerl-pixels-")) / "result.json"
    cmd = [str(python), "-m", "benchmarks.baselines.agilerl_ippo", "--steps", str(steps),
           "--population", str(cfg.population.size), "--num-envs", str(cfg.env.num_envs),
           "--learn-step", str(hp.learn_step), "--batch-size", str(hp.batch_size),
           "--lr", str(hp.lr), "--ent-coef", str(hp.ent_coef),
           "--update-epochs", str(hp.update_epochs), "--gamma", str(hp.gamma),
           *(["--continuous"] if cfg.env.kwargs.get("continuous", True) else []),
           "--evo-steps", str(cfg.evolution.evo_steps), "--seed", str(seed), "--json", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def report(ours: dict[str, Any], theirs: dict[str, Any] | None) -> None:
    print(f"distmarl: {ours['env_steps']:,} env steps, {ours['env_steps_per_s']:.1f} env steps/s "
          f"(set-up {ours['setup_seconds']:.1f} s not counted)")
    for name, mib in ours["peak_rss_mib"].items():
        print(f"  peak RSS {name:<12} {mib:8.0f} MiB  (without shared object-store pages "
              f"{ours['private_rss_mib'][name]:.0f} MiB)")
    b = ours["buffer"]
    print(f"  buffer capacity {b['capacity_rows']:,} rows x {b['row_bytes']:,} bytes = "
          f"{b['capacity_mib']:.0f} MiB; buffer actor peak RSS / that = "
          f"{b['rss_over_capacity']:.3f} ({b['private_over_capacity']:.3f} without shared pages)")
    if theirs is None:
        return
    print(f"AgileRL:  {theirs['env_steps']:,} env steps, {theirs['env_steps_per_s']:.1f} env steps/s "
          f"(torch threads {theirs['torch_threads']})")
    for name, mib in theirs["peak_rss_mib"].items():
        print(f"  peak RSS {name:<12} {mib:8.0f} MiB")
    print(f"ratio distmarl / AgileRL env steps/s: "
          f"{ours['env_steps_per_s'] / theirs['env_steps_per_s']:.2f}x")


def env_step_ms(config: Path, steps: int = 300, repeats: int = 3, seed: int = 0
                ) -> dict[str, float]:
    """Milliseconds per step of one preprocessed env (random actions, in this process, best of
    ``repeats`` timing windows): through SuperSuit's wrappers over PettingZoo's own parallel
    env (what the AgileRL arm steps), and through distmarl's env (its light parallel stepping,
    SuperSuit's observation wrappers applied straight to the parallel env)."""
    import time

    from distmarl.config import load_config
    from distmarl.envs import make_env, parse_wrappers

    cfg = load_config(config, [])
    wrappers = parse_wrappers(cfg.env.wrappers)
    out = {}
    for name, light in (("supersuit", False), ("distmarl", True)):
        env = make_env(cfg.env.spec, light=light, wrappers=wrappers, **cfg.env.kwargs)
        best = math.inf
        for r in range(repeats):
            env.reset(seed=seed + r)
            spaces = {a: env.action_space(a) for a in env.possible_agents}
            for i, space in enumerate(spaces.values()):
                space.seed(seed + i)
            start = time.perf_counter()
            for _ in range(steps):
                env.step({a: spaces[a].sample() for a in env.agents})
                if not env.agents:
                    env.reset()
            best = min(best, (time.perf_counter() - start) / steps * 1000)
        env.close()
        out[name] = best
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--steps", type=int, default=20_000,
                        help="population env steps per arm (all members together)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--skip-agilerl", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--env-only", action="store_true",
                        help="only time one preprocessed env's steps, SuperSuit's stack and ours")
    args = parser.parse_args(argv)
    if args.env_only:
        ms = env_step_ms(args.config)
        ratio = ms["distmarl"] / ms["supersuit"]
        print(f"one env step: {ms['supersuit']:.2f} ms through SuperSuit's stack, "
              f"{ms['distmarl']:.2f} ms through distmarl's ({ratio:.2f}x)")
        return
    ours = run_distmarl(args.config, args.steps, args.seed, args.interval_s)
    if args.json:  # written as each arm ends
        args.json.write_text(json.dumps({"distmarl": ours, "agilerl": None}, indent=1))
    theirs = None if args.skip_agilerl else run_agilerl(args.config, args.steps, args.seed)
    report(ours, theirs)
    if args.json:
        args.json.write_text(json.dumps({"distmarl": ours, "agilerl": theirs}, indent=1))


if __name__ == "__main__":
    main()
