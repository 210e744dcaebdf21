"""Soak: a long run of the example config, sampling every actor's memory and the object store.

    .venv/bin/python -m benchmarks.system.soak   # 30 minutes, a sample a minute
    .venv/bin/python -m benchmarks.system.soak --minutes 2 --interval-s 15 --warmup-min 0.5 # smoke

Runs ``examples/configs/speaker_listener_maddpg.yaml`` (``--config``, ``--set`` overrides)
through the real trainer (``distmarl.runtime.driver.trainer.train``, a local Ray, MLflow tracking and
checkpoints on, as ``distmarl train`` does) with ``training.max_steps_per_member`` large enough never to
end it, and stops it after ``--minutes`` the way Ctrl-C does (a final checkpoint). Every
``--interval-s`` it samples the resident memory (RSS) of every actor process (coordinator,
buffer, learners, rollout workers; pids from ``ray.util.state.list_actors``, an actor that Ray
restarted keeps its column), the bytes the object store holds and the rows the replay buffer
holds. It prints one row per sample, then for each column its level, the largest deviation from
that level afterwards in % and MiB, and PASS when that stays within ``--tolerance`` (10 %) of
the level, else FAIL; and its drift: the median of the last third of those samples against the
level, in % (growth shows there; a passing spike, such as a checkpoint's buffer state crossing
the object store, does not). Exit status 1 when any column fails.

Warm-up ends at the first sample taken once ``--warmup-min`` minutes have passed *and* the
replay buffer is full: until then the buffer actor's memory grows by design, as its
preallocated rings are written for the first time (the operating system maps their pages on
first touch). The level is that sample. The object store holds only objects in flight (weight
dicts, chunks, batches: a few MiB that come and go with timing), so a percentage of its level
means little; it passes while it stays within ``--store-band-mib`` (8 MiB) of its level, or
the percentage where that is wider: a leak grows past any fixed band.

A run on one machine only: RSS is read with psutil on this machine's pids.
"""

from __future__ import annotations

import _thread
import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"

MIB = 1024 * 1024
SHORT = {"Coordinator": "coord", "BufferShell": "buffer", "LearnerShell": "learner",
         "RolloutShell": "worker"}
STORE = "objstore"
FILL = "buffer_rows"  # not a memory column: it decides when the warm-up ends
#: run settings of the soak (before the user's --set): a run that only --minutes ends, with
#: metric writes and checkpoints every few thousand env steps per member as in a real run
SOAK_SETS = ["training.max_steps_per_member=1000000000", "tracking.write_interval=2000",
             "tracking.checkpoint_interval=20000", "tracking.keep_checkpoints=2"]


@dataclass
class Samples:
    """Seconds since the first sample, one MiB value per column and sample, and the replay
    buffer's fill (stored rows / capacity) at each sample."""

    times: list[float] = field(default_factory=list)
    columns: dict[str, list[float | None]] = field(default_factory=dict)
    fill: list[float | None] = field(default_factory=list)

    def add(self, t: float, values: dict[str, float | None]) -> None:
        self.fill.append(values.pop(FILL, None))
        for name in values:
            self.columns.setdefault(name, [None] * len(self.times))
        self.times.append(t)
        for name, series in self.columns.items():
            series.append(values.get(name))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run")
    parser.add_argument("--interval-s", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--warmup-min", type=float, default=3.0,
                        help="least minutes before the level is taken (and the buffer full)")
    parser.add_argument("--store-band-mib", type=float, default=8.0,
                        help="the object store's allowed deviation in MiB (or --tolerance)")
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="largest deviation from the level, as a fraction")
    parser.add_argument("--config", type=Path, default=CONFIG, help="experiment YAML")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    parser.add_argument("--json", type=Path, help="also write the samples and verdicts here")
    return parser.parse_args()


# ------------------------------------------------------------------------------------ sampling
def expected_actors(cfg: Any) -> int:
    """Coordinator, buffer, one learner per member and its rollout workers."""
    pop = cfg.population
    return 2 + pop.size * (1 + pop.workers_per_member)


def actor_pids(address: str | None = None) -> dict[str, tuple[str, int]]:
    """actor id -> (class name, pid) of every live actor of the Ray at ``address`` (its GCS
    address; None: the one Ray finds, which fails where several run on this machine)."""
    from ray.util.state import list_actors

    rows = list_actors(address=address, filters=[("state", "=", "ALIVE")], limit=10_000,
                       raise_on_missing_output=False)
    return {r.actor_id: (r.class_name, int(r.pid)) for r in rows if r.pid}


def object_store_mib() -> float | None:
    """MiB held by the object store (all nodes), or None when Ray does not say."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    try:
        reply = get_memory_info_reply(get_state_from_address())
    except Exception:
        return None
    return reply.store_stats.object_store_bytes_used / MIB


def rss_mib(pid: int) -> float | None:
    import psutil  # Ray ships it (ray/thirdparty_files, on sys.path once ray is imported)

    try:
        return psutil.Process(pid).memory_info().rss / MIB
    except psutil.Error:
        return None


class Labels:
    """A stable column name per actor id: ``learner#0``, ``worker#3``, ... (by first sight)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, actor_id: str, class_name: str) -> str:
        if actor_id not in self.names:
            kind = SHORT.get(class_name, class_name)
            n = sum(name.startswith(kind + "#") for name in self.names.values())
            self.names[actor_id] = f"{kind}#{n}" if kind in ("learner", "worker") else kind
        return self.names[actor_id]


def buffer_fill(coord: Any) -> float | None:
    """Stored rows / capacity of the run's replay buffer, or None before the coordinator is
    up (or while it does not answer)."""
    import ray

    if coord is None:
        return None
    buffer = ray.get(coord.handles.remote(), timeout=30)["buffer"]
    stats = ray.get(buffer.stats.remote(), timeout=30)
    return stats["size"] / stats["capacity"]


def take_sample(labels: Labels, coord: Any) -> dict[str, float | None]:
    values: dict[str, float | None] = {labels(aid, cls): rss_mib(pid)
                                       for aid, (cls, pid) in sorted(actor_pids().items())}
    values[STORE] = object_store_mib()
    values[FILL] = _tolerant(lambda: buffer_fill(coord), None)
    return values


def warmup_end(samples: Samples, warmup_s: float) -> float | None:
    """Time of the first sample at or after ``warmup_s`` with the replay buffer full; None
    when there is none (the run was too short to fill it)."""
    for t, fill in zip(samples.times, samples.fill):
        if t >= warmup_s and fill is not None and fill >= 1.0:
            return t
    return None


class Sampler(threading.Thread):
    """Waits for every actor, samples every ``interval_s`` for ``minutes``, then interrupts the
    main thread (where ``train`` runs) as Ctrl-C would."""

    def __init__(self, expected: int, minutes: float, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.expected, self.minutes, self.interval_s = expected, minutes, interval_s
        self.samples = Samples()
        self.labels = Labels()
        self.coord: Any = None  # the coordinator's handle, once train() has made it
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._wait_for_actors()
            start = time.monotonic()
            end = start + self.minutes * 60
            while True:
                now = time.monotonic()
                values = _tolerant(lambda: take_sample(self.labels, self.coord), None)
                if values is None:  # asked once more (after a pause); a second error ends it
                    values = take_sample(self.labels, self.coord)
                self.samples.add(now - start, values)
                print(f"  sample at {(now - start) / 60:5.1f} min", file=sys.stderr, flush=True)
                due = start + len(self.samples.times) * self.interval_s  # on a fixed schedule
                if due > end + 1.0:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
        except BaseException as err:
            self.error = err
        _thread.interrupt_main()

    def _wait_for_actors(self, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while len(_tolerant(actor_pids, {})) < self.expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {self.expected} actors after {timeout_s} s")
            time.sleep(1.0)


def _tolerant(fn: Any, default: Any) -> Any:
    """``fn()``, or ``default`` when it raises: Ray's state API answers only once the
    dashboard is up, which on a busy machine can be a while after ``ray.init``."""
    try:
        return fn()
    except Exception:
        time.sleep(2.0)
        return default


# ------------------------------------------------------------------------------------ verdicts
@dataclass
class Verdict:
    column: str
    level: float | None
    max_dev_pct: float | None
    max_dev_mib: float | None
    drift_pct: float | None
    ok: bool | None  # None: no sample after the warm-up


def verdict(column: str, times: list[float], values: list[float | None], warmup_s: float,
            tolerance: float, band_mib: float = 0.0) -> Verdict:
    """Level: the first sample at or after ``warmup_s``; then the largest deviation from it,
    which passes within ``tolerance`` of the level or ``band_mib``, whichever is wider."""
    after = [v for t, v in zip(times, values) if t >= warmup_s and v is not None]
    if not after:
        return Verdict(column, None, None, None, None, None)
    level = after[0]
    dev = max(abs(v - level) for v in after)
    tail = sorted(after[len(after) - max(1, len(after) // 3):])
    return Verdict(column, level, _pct(dev, level), dev, _pct(tail[len(tail) // 2] - level, level),
                   dev <= max(tolerance * level, band_mib))


def _pct(delta: float, level: float) -> float:
    if level > 0:
        return 100.0 * delta / level
    return 0.0 if delta == 0 else float("inf")


def column_order(names: list[str]) -> list[str]:
    """coord, buffer, learners, workers (by number), then the object store."""
    kinds = ["coord", "buffer", "learner", "worker", STORE]

    def key(name: str) -> tuple[int, int, str]:
        kind, _, n = name.partition("#")
        return (kinds.index(kind) if kind in kinds else len(kinds), int(n or 0), name)

    return sorted(names, key=key)


def print_table(samples: Samples) -> None:
    names = column_order(list(samples.columns))
    width = max(9, *(len(n) + 1 for n in names))
    print("RSS per actor process and object store bytes, MiB; replay buffer fill, %")
    print(f"{'minute':>7}" + "".join(f"{n:>{width}}" for n in names) + f"{'fill %':>8}")
    for i, t in enumerate(samples.times):
        cells = [samples.columns[n][i] for n in names]
        fill = samples.fill[i]
        print(f"{t / 60:7.1f}" + "".join(
            f"{'-':>{width}}" if c is None else f"{c:{width}.1f}" for c in cells)
            + (f"{'-':>8}" if fill is None else f"{100 * fill:8.1f}"))


def print_verdicts(verdicts: list[Verdict], start_s: float | None, tolerance: float,
                   band_mib: float) -> None:
    if start_s is None:
        print("\nno level: the replay buffer was not full at any sample after the warm-up "
              "minutes (run longer, or lower --warmup-min)")
        return
    print(f"\nwarm-up ended at {start_s / 60:.1f} min (buffer full); level = that sample; "
          f"target: every column within {100 * tolerance:.0f}% of its level (the object store: "
          f"or {band_mib:g} MiB)")
    print(f"{'column':<12}{'level MiB':>11}{'max dev %':>11}{'max dev MiB':>13}{'drift %':>9}"
          "  verdict")
    for v in verdicts:
        if v.ok is None:
            print(f"{v.column:<12}{'-':>11}{'-':>11}{'-':>13}{'-':>9}  n/a (no sample after "
                  "warm-up)")
            continue
        print(f"{v.column:<12}{v.level:11.1f}{v.max_dev_pct:11.1f}{v.max_dev_mib:13.2f}"
              f"{v.drift_pct:+9.1f}  {'PASS' if v.ok else 'FAIL'}")


# ------------------------------------------------------------------------------------ main
def main() -> int:
    args = parse_args()
    import ray  # first: it puts its psutil on sys.path

    from distmarl.config import load_config
    from distmarl.runtime.driver.cluster import init_ray
    from distmarl.runtime.driver.trainer import train

    # The sampler stops the run with interrupt_main(), which does nothing where SIGINT is
    # ignored (a job started in the background by a shell): restore Python's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_root = Path(tempfile.mkdtemp(prefix="distmarl-soak-"))
    cfg = load_config(args.config, [*SOAK_SETS, f"tracking.directory={run_root}", *args.set])
    init_ray(num_cpus=args.num_cpus, log_to_driver=False)
    sampler = Sampler(expected_actors(cfg), args.minutes, args.interval_s)
    sampler.start()
    summary = train(cfg, show_progress=False,
                    on_coordinator=lambda coord: setattr(sampler, "coord", coord))
    sampler.join(timeout=60)
    ray.shutdown()
    if sampler.error is not None:
        raise sampler.error
    samples = sampler.samples
    print_table(samples)
    start_s = warmup_end(samples, args.warmup_min * 60)
    verdicts = [verdict(name, samples.times, samples.columns[name],
                        float("inf") if start_s is None else start_s, args.tolerance,
                        args.store_band_mib if name == STORE else 0.0)
                for name in column_order(list(samples.columns))]
    print_verdicts(verdicts, start_s, args.tolerance, args.store_band_mib)
    print(f"\nrun: {summary['env_steps']:,} env steps in {summary['wall_seconds']:.0f} s, "
          f"{summary['generations']} generations, stop: {summary['stop_reason']}, "
          f"faults: {summary['faults']}; run dir {summary['run_dir']}")
    if args.json:
        args.json.write_text(json.dumps({
            "times_s": samples.times, "columns": samples.columns, "buffer_fill": samples.fill,
            "warmup_end_s": start_s, "verdicts": [v.__dict__ for v in verdicts], "summary": summary}, indent=1,
            default=str))
    return 1 if start_s is None or any(v.ok is False for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
