"""How distmarl scales on this machine (or a Ray cluster): population env steps/s and learner
updates/s against rollout workers per member and population size, with CPU learners and, where
Ray reports GPUs, GPU learners at fractions of a GPU each.

Each point is one ``distmarl train`` of the main job (``speaker_listener_maddpg.yaml``, or
``--config``) in its own process, ``--steps`` env steps per member, no tracking; rates are over
the training time (start-up listed apart as ``setup s``). While it runs, this machine's CPU
utilisation (``/proc/stat``, all cores) and, where ``nvidia-smi`` answers, GPU utilisation are
sampled, and the peak resident memory of all the run's processes (the driver, Ray's and every
actor's). Printed per curve (population size x members per learner x learner kind): env
steps/s, updates/s, the
speed-up over the curve's 1-worker point, and the efficiency: env steps/s per busy core
(utilisation x cores) against the 1-worker point's (1.0: every added core did as much work).

``--two-node`` adds one point on a 2-node Ray cluster started on this machine (``ray start``
per node, half the cores each), so the path that crosses nodes is measured. ``--address``
runs every point on an existing cluster instead (utilisation is then this machine's only).

    .venv/bin/python -m benchmarks.system.scaling [--workers 1 2 4 8] [--sizes 4 8 16]
        [--members-per-learner auto 1 4 16] [--gpu-fractions 1 0.5 0.25] [--steps 10000]
        [--local] [--two-node] [--address ADDR]
        [--set KEY=VALUE ...] [--json scaling.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from benchmarks import CONFIGS, ROOT
from benchmarks.system.training import train_cli, train_seconds
from distmarl.runtime.logic.grouping import learner_groups, members_per_learner

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"


@dataclass(frozen=True)
class Point:
    """One run of the grid."""

    size: int  # population size
    workers: int  # rollout workers per member
    gpu: float = 0.0  # GPUs per learner (0: CPU learners)
    nodes: int = 1  # Ray nodes (2: the local 2-node cluster)
    per_learner: str = "auto"  # population.members_per_learner

    @property
    def curve(self) -> str:
        kind = "CPU learners" if self.gpu == 0 else f"{self.gpu:g} GPU per learner"
        nodes = "" if self.nodes == 1 else f", {self.nodes} nodes"
        return f"{self.size} members, {self.per_learner} per learner, {kind}{nodes}"


@dataclass
class Measured:
    point: Point
    env_steps: int
    train_seconds: float
    setup_seconds: float
    updates: int
    cpu_util: float  # mean share of this machine's cores busy, 0..1
    gpu_util: float | None  # mean GPU utilisation 0..1 over the GPUs, None: no nvidia-smi
    error: str | None = None
    devices: list[str] = field(default_factory=list)
    peak_rss_gib: float = 0.0  # the run's processes' resident memory summed, at its peak

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.train_seconds if self.train_seconds > 0 else 0.0

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.train_seconds if self.train_seconds > 0 else 0.0


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from ``/proc/stat``."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)  # idle + iowait
    return sum(parts) - idle, sum(parts)


def gpu_count() -> int:
    """GPUs ``nvidia-smi`` lists (0 without one)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True)
    return len([line for line in out.stdout.splitlines() if line.startswith("GPU")])


class GpuSampler:
    """Mean GPU utilisation over a run, polled from ``nvidia-smi`` once a second."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> GpuSampler:
        if shutil.which("nvidia-smi") is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True)
            values = [float(v) for v in out.stdout.split() if v.strip()]
            if values:
                self.samples.append(sum(values) / len(values) / 100.0)

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


class MemorySampler:
    """The peak, over a run, of the resident memory of a process and all its descendants
    (the driver, Ray's own processes and every actor), polled from ``/proc`` twice a second
    from :meth:`watch` on. Pages shared between processes (torch's libraries) count once per
    process: an upper bound."""

    def __init__(self) -> None:
        self.pid, self.peak = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def watch(self, pid: int) -> None:
        """Start polling ``pid``'s tree."""
        self.pid = pid
        self._thread.start()

    def stop(self) -> float:
        """Stop polling; the peak in GiB."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.peak / 2**30

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, tree_rss(self.pid))


def tree_rss(root: int) -> int:
    """Bytes resident in ``root`` and its descendants now."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:  # gone meanwhile
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        kb = next((line.split()[1] for line in status.splitlines()
                   if line.startswith("VmRSS:")), "0")
        rss[int(entry.name)] = int(kb) * 1024
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(rss.get(p, 0) for p in tree)


def overrides(point: Point, steps: int, extra: Sequence[str]) -> list[str]:
    """``--set`` values of one point."""
    return [f"training.max_steps_per_member={steps}", f"population.size={point.size}",
            f"population.workers_per_member={point.workers}",
            f"population.members_per_learner={point.per_learner}",
            f"resources.num_gpus_per_learner={point.gpu}",
            "tracking.checkpoint_interval=0", *extra]


def run_point(point: Point, config: Path, steps: int, extra: Sequence[str],
              address: str | None = None, env: dict[str, str] | None = None,
              local: bool = False) -> Measured:
    """One ``distmarl train`` of ``point`` (``local``: in process); its figures (``error``
    set when it failed)."""
    args = [*(["--address", address] if address else []), *(["--local"] if local else [])]
    busy0, total0 = cpu_times()
    memory = MemorySampler()
    with GpuSampler() as gpus:
        trained = train_cli(config, overrides(point, steps, extra), args=args, env=env,
                            watch=memory.watch, prefix="scaling-")
        peak_gib = memory.stop()
    busy1, total1 = cpu_times()
    util = (busy1 - busy0) / max(1, total1 - total0)
    s = trained.summary
    if s is None:
        return Measured(point, 0, 0.0, 0.0, 0, util, gpus.mean, error=trained.error())
    # the CPU share over the training only is not separable here; start-up is short against it
    return Measured(point, int(s["env_steps"]), train_seconds(s), s["setup_seconds"],
                    int(s["updates"]), util, gpus.mean,
                    devices=sorted(set(s["learner_devices"])), peak_rss_gib=peak_gib)


def grid(sizes: Sequence[int], workers: Sequence[int], gpu_fractions: Sequence[float],
         gpus: int, per_learner: Sequence[str] = ("auto",)) -> list[Point]:
    """CPU-learner points over sizes x members per learner x workers (a number of members
    per learner above the size is left out), then GPU points (1 worker per member) for
    every fraction whose learners fit on ``gpus`` GPUs."""
    def wanted(k: str, size: int) -> bool:
        return k == "auto" or int(k) <= size

    def learners(k: str, size: int, fraction: float) -> int:
        setting: int | Literal["auto"] = "auto" if k == "auto" else int(k)
        per = members_per_learner(setting, size, {"GPU": float(gpus)}, fraction)
        return len(learner_groups(size, per))

    points = [Point(s, w, per_learner=k) for s in sizes for k in per_learner if wanted(k, s)
              for w in workers]
    if gpus > 0:
        points += [Point(s, 1, f, per_learner=k) for f in gpu_fractions for s in sizes
                   for k in per_learner
                   if wanted(k, s) and f * learners(k, s, f) <= gpus + 1e-9]
    return points


def report(results: Sequence[Measured], cores: int) -> list[str]:
    """The table: one block per curve, each point against the curve's fewest-workers point
    (a 2-node point against the same point on one node)."""
    lines = [f"{cores} cores on this machine; rates over training time (start-up apart)",
             f"{'curve / workers per member':<44} {'env steps/s':>11} {'updates/s':>9} "
             f"{'setup s':>7} {'RSS GiB':>7} {'CPU':>5} {'GPU':>5} {'speed-up':>8} "
             f"{'efficiency':>10}"]
    curves: dict[str, list[Measured]] = {}
    for r in results:
        curves.setdefault(r.point.curve, []).append(r)
    for curve, rows in curves.items():
        lines.append(curve)
        ok = [r for r in rows if r.error is None]
        if rows[0].point.nodes > 1:
            one = replace(rows[0].point, nodes=1)
            ok = [r for r in results if r.point == one and r.error is None]
        base = min(ok, key=lambda r: r.point.workers) if ok else None
        for r in sorted(rows, key=lambda r: r.point.workers):
            label = f"  {r.point.workers}"
            if r.error is not None:
                lines.append(f"{label:<44} failed: {r.error.splitlines()[0]}")
                continue
            if base is None:
                lines.append(f"{label:<44} {r.env_steps_per_s:>11,.0f} (nothing to compare)")
                continue
            speed = r.env_steps_per_s / base.env_steps_per_s
            per_core = r.env_steps_per_s / max(r.cpu_util * cores, 1e-9)
            base_per_core = base.env_steps_per_s / max(base.cpu_util * cores, 1e-9)
            gpu = "-" if r.gpu_util is None else f"{100 * r.gpu_util:.0f}%"
            lines.append(f"{label:<44} {r.env_steps_per_s:>11,.0f} {r.updates_per_s:>9,.0f} "
                         f"{r.setup_seconds:>7.1f} {r.peak_rss_gib:>7.2f} "
                         f"{100 * r.cpu_util:>4.0f}% {gpu:>5} "
                         f"{speed:>7.2f}x {per_core / base_per_core:>10.2f}")
    return lines


def two_node_point(point: Point, config: Path, steps: int, extra: Sequence[str],
                   cores: int) -> Measured:
    """``point`` on a 2-node cluster of this machine (half the cores each; stopped after)."""
    sys.path.insert(0, str(ROOT))
    from tests.jobs.raycluster import LocalRayCluster

    cluster = LocalRayCluster()
    try:
        half = max(1, cores // 2)
        cluster.start_head(num_cpus=half).add_node(num_cpus=max(1, cores - half))
        return run_point(point, config, steps, extra, address=cluster.gcs_address,
                         env=cluster.env())
    finally:
        cluster.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8],
                    help="rollout workers per member")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16], help="population sizes")
    ap.add_argument("--gpu-fractions", type=float, nargs="+", default=[1.0, 0.5, 0.25],
                    help="GPUs per learner of the GPU points (where Ray reports GPUs)")
    ap.add_argument("--members-per-learner", nargs="+", default=["auto"],
                    help="population.members_per_learner values (numbers or auto)")
    ap.add_argument("--steps", type=int, default=10_000, help="env steps per member")
    ap.add_argument("--local", action="store_true", help="run every point in process")
    ap.add_argument("--two-node", action="store_true",
                    help="add a point on a 2-node Ray cluster of this machine")
    ap.add_argument("--address", help="run every point on this Ray cluster")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every point (repeatable)")
    ap.add_argument("--json", type=Path, help="write every point's figures here")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    points = grid(args.sizes, args.workers, args.gpu_fractions,
                  0 if args.local else gpu_count(), args.members_per_learner)
    results: list[Measured] = []
    for point in points:
        started = time.perf_counter()
        results.append(run_point(point, args.config, args.steps, args.set, args.address,
                                 local=args.local))
        r = results[-1]
        print(f"{point.curve}, {point.workers} workers: "
              + (f"failed ({r.error.splitlines()[0]})" if r.error else
                 f"{r.env_steps_per_s:,.0f} env steps/s, {r.updates_per_s:,.0f} updates/s, "
                 f"setup {r.setup_seconds:.1f} s, peak RSS {r.peak_rss_gib:.2f} GiB, "
                 f"CPU {100 * r.cpu_util:.0f}%, devices {r.devices}")
              + f" ({time.perf_counter() - started:.0f} s)", flush=True)
    if args.two_node:
        point = Point(min(args.sizes), min(2, max(args.workers)), nodes=2)
        results.append(two_node_point(point, args.config, args.steps, args.set, cores))
        # the same point on one node, for the comparison
        if not any(r.point == Point(point.size, point.workers) for r in results):
            results.append(run_point(Point(point.size, point.workers), args.config,
                                     args.steps, args.set))
    print("\n".join(report(results, cores)))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "env_steps_per_s": r.env_steps_per_s,
                                          "updates_per_s": r.updates_per_s} for r in results],
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
