"""Soak: a long run of the example config, sampling every actor's memory and the object store.

    .venv/bin/python benchmarks/soak.py                      # 30 minutes, a sample a minute
    .venv/bin/python benchmarks/soak.py --minutes 2 --interval-s 15 --warmup-min 0.5  # smoke

Runs ``examples/configs/speaker_listener_maddpg.yaml`` (``--config``, ``--set`` overrides)
through the real trainer (``distmarl.runtime.trainer.train``, a local Ray, MLflow tracking and
checkpoints on, as ``distmarl train`` does) with ``training.max_steps`` large enough never to
end it, and stops it after ``--minutes`` the way Ctrl-C does (a final checkpoint). Every
``--interval-s`` it samples the resident memory (RSS) of every actor process (coordinator,
buffer, learners, rollout workers; pids from ``ray.util.state.list_actors``, an actor that Ray
restarted keeps its column) and the bytes the object store holds. It prints one row per sample,
then for each column its level (the first sample after ``--warmup-min``), the largest deviation
from that level afterwards in % and MiB, and PASS when that stays within ``--tolerance``
(10 %) of the level, else FAIL; and its drift: the median of the last third of those samples
against the level, in % (growth shows there; a passing spike, such as a checkpoint's buffer
state crossing the object store, does not). Exit status 1 when any column fails.

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

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "speaker_listener_maddpg.yaml"
sys.path.insert(0, str(ROOT))

MIB = 1024 * 1024
SHORT = {"Coordinator": "coord", "BufferShell": "buffer", "LearnerShell": "learner",
         "RolloutShell": "worker"}
STORE = "objstore"
#: run settings of the soak (before the user's --set): a run that only --minutes ends, with
#: metric writes and checkpoints every few thousand env steps per member as in a real run
SOAK_SETS = ["training.max_steps=1000000000", "tracking.write_interval=2000",
             "tracking.checkpoint_interval=20000", "tracking.keep_last=2"]


@dataclass
class Samples:
    """Seconds since the first sample, and one MiB value per column and sample."""

    times: list[float] = field(default_factory=list)
    columns: dict[str, list[float | None]] = field(default_factory=dict)

    def add(self, t: float, values: dict[str, float | None]) -> None:
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
                        help="minutes before the level is taken")
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


def actor_pids() -> dict[str, tuple[str, int]]:
    """actor id -> (class name, pid) of every live actor of this Ray."""
    from ray.util.state import list_actors

    rows = list_actors(filters=[("state", "=", "ALIVE")], limit=10_000,
                       raise_on_missing_output=False)
    return {r.actor_id: (r.class_name, int(r.pid)) for r in rows if r.pid}


def object_store_mib() -> float | None:
    """MiB held by the object store (all nodes), or None when Ray does not say."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    try:
        reply = get_memory_info_reply(get_state_from_address())
    except Exception:  # noqa: BLE001 - a private API: a missing figure is not fatal
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


def take_sample(labels: Labels) -> dict[str, float | None]:
    values: dict[str, float | None] = {labels(aid, cls): rss_mib(pid)
                                       for aid, (cls, pid) in sorted(actor_pids().items())}
    values[STORE] = object_store_mib()
    return values


class Sampler(threading.Thread):
    """Waits for every actor, samples every ``interval_s`` for ``minutes``, then interrupts the
    main thread (where ``train`` runs) as Ctrl-C would."""

    def __init__(self, expected: int, minutes: float, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.expected, self.minutes, self.interval_s = expected, minutes, interval_s
        self.samples = Samples()
        self.labels = Labels()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._wait_for_actors()
            start = time.monotonic()
            end = start + self.minutes * 60
            while True:
                now = time.monotonic()
                values = _tolerant(lambda: take_sample(self.labels), None)
                if values is None:  # asked once more (after a pause); a second error ends it
                    values = take_sample(self.labels)
                self.samples.add(now - start, values)
                print(f"  sample at {(now - start) / 60:5.1f} min", file=sys.stderr, flush=True)
                due = start + len(self.samples.times) * self.interval_s  # on a fixed schedule
                if due > end + 1.0:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
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
    except Exception:  # noqa: BLE001 - asked again on the next turn
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
            tolerance: float) -> Verdict:
    """Level: the first sample at or after ``warmup_s``; then the largest deviation from it."""
    after = [v for t, v in zip(times, values) if t >= warmup_s and v is not None]
    if not after:
        return Verdict(column, None, None, None, None, None)
    level = after[0]
    dev = max(abs(v - level) for v in after)
    tail = sorted(after[len(after) - max(1, len(after) // 3):])
    return Verdict(column, level, _pct(dev, level), dev, _pct(tail[len(tail) // 2] - level, level),
                   _pct(dev, level) <= 100.0 * tolerance)


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
    print("RSS per actor process and object store bytes, MiB")
    print(f"{'minute':>7}" + "".join(f"{n:>{width}}" for n in names))
    for i, t in enumerate(samples.times):
        cells = [samples.columns[n][i] for n in names]
        print(f"{t / 60:7.1f}" + "".join(
            f"{'-':>{width}}" if c is None else f"{c:{width}.1f}" for c in cells))


def print_verdicts(verdicts: list[Verdict], warmup_min: float, tolerance: float) -> None:
    print(f"\nafter {warmup_min:g} min of warm-up: level = first sample after it; target: every "
          f"column within {100 * tolerance:.0f}% of its level")
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
    import ray  # noqa: F401 - first: it puts its psutil on sys.path

    from distmarl.config import load_config
    from distmarl.runtime.cluster import init_ray
    from distmarl.runtime.trainer import train

    # The sampler stops the run with interrupt_main(), which does nothing where SIGINT is
    # ignored (a job started in the background by a shell): restore Python's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_root = Path(tempfile.mkdtemp(prefix="distmarl-soak-"))
    cfg = load_config(args.config, [*SOAK_SETS, f"tracking.directory={run_root}", *args.set])
    init_ray(num_cpus=args.num_cpus, log_to_driver=False)
    sampler = Sampler(expected_actors(cfg), args.minutes, args.interval_s)
    sampler.start()
    summary = train(cfg, show_progress=False)
    sampler.join(timeout=60)
    ray.shutdown()
    if sampler.error is not None:
        raise sampler.error
    samples = sampler.samples
    print_table(samples)
    verdicts = [verdict(name, samples.times, samples.columns[name], args.warmup_min * 60,
                        args.tolerance) for name in column_order(list(samples.columns))]
    print_verdicts(verdicts, args.warmup_min, args.tolerance)
    print(f"\nrun: {summary['env_steps']:,} env steps in {summary['wall_seconds']:.0f} s, "
          f"{summary['generations']} generations, stop: {summary['stop_reason']}, "
          f"faults: {summary['faults']}; run dir {summary['run_dir']}")
    if args.json:
        args.json.write_text(json.dumps({
            "times_s": samples.times, "columns": samples.columns,
            "verdicts": [v.__dict__ for v in verdicts], "summary": summary}, indent=1,
            default=str))
    return 1 if any(v.ok is False for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
