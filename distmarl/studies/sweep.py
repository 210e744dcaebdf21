"""``distmarl sweep``: every grid point of a config trained with every seed, resumable,
ending in a report (:mod:`distmarl.studies.report`).

A sweep's folder holds ``sweep.json`` (the config file, its ``--set`` overrides, the grid and
the seeds: what makes it this sweep) and a run directory per grid point and seed,
``<arm>/seed-<s>``, each with a ``study.json`` naming its arm (the grid point, ``k=v,k=v``;
``base`` without a grid). Run again with the same arguments, a sweep skips every finished run
and resumes an interrupted one from its last checkpoint; a folder holding another sweep is
refused. The runs are ``distmarl train`` processes, one after another or side by side
(:mod:`~distmarl.studies.runner`); a signal stops the runs in flight as it stops any run (a
checkpoint, then the exit status of the signal), and the sweep with them.

    plan = SweepPlan.parse("tiny.yaml", "0-2", ["training.lr=0.01,0.001"], [])
    outcome = run_sweep(plan, Path("sweeps/lr"), Placement(local=True, parallel=2))
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from distmarl.checkpoint import list_checkpoints
from distmarl.config import ConfigError, load_config
from distmarl.studies.report import STUDY_FILE, Report, find_runs
from distmarl.studies.runner import Outcome, Placement, RunLaunch, run_launches
from distmarl.studies.schedule import Need, Room, check_fits
from distmarl.studies.tracking import SweepTracking

#: the file that says which sweep a folder holds
SWEEP_FILE = "sweep.json"
#: how a run ends that a sweep counts as finished
FINISHED = ("max_steps", "target")


def parse_seeds(text: str) -> list[int]:
    """``0-4`` / ``0,2,5`` / ``0-2,7`` as seeds; ConfigError naming ``--seeds`` otherwise."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            first, sep, last = part.strip().partition("-")
            seeds += range(int(first), int(last) + 1) if sep else [int(first)]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: write a range (0-4) or a list (0,2,5)") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds {text!r}: each seed once, none negative")
    return seeds


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``KEY=V1,V2`` items as ``{key: [values]}``; ConfigError naming ``--grid`` otherwise."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values or key in grid:
            raise ConfigError(f"--grid {item!r}: write KEY=V1,V2 (each key once)")
        grid[key] = [v.strip() for v in values.split(",")]
    return grid


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep runs: ``config`` with ``sets`` (``--set``), each grid point of ``grid``
    (``{key: [values]}``, every combination) with each of ``seeds``."""

    config: str
    sets: tuple[str, ...]
    grid: dict[str, list[str]]
    seeds: tuple[int, ...]

    @classmethod
    def parse(cls, config: str | Path, seeds: str, grid: Sequence[str], sets: Sequence[str]
              ) -> SweepPlan:
        """The plan of the command line's arguments, every grid point's config loaded once
        (an unknown key or a bad value fails here, naming ``--grid``, before anything runs)."""
        plan = cls(str(Path(config).resolve()), tuple(sets), parse_grid(grid),
                   tuple(parse_seeds(seeds)))
        for arm, point in plan.points():
            try:
                load_config(plan.config, [*plan.sets, *point])
            except ConfigError as err:
                raise ConfigError(f"--grid point {arm}: {err}") from None
        return plan

    def points(self) -> list[tuple[str, list[str]]]:
        """Each grid point: its arm's name (``k=v,k=v``; ``base`` without a grid) and its
        overrides."""
        if not self.grid:
            return [("base", [])]
        keys = list(self.grid)
        return [(",".join(f"{k}={v}" for k, v in zip(keys, values)),
                 [f"{k}={v}" for k, v in zip(keys, values)])
                for values in itertools.product(*self.grid.values())]

    def runs(self) -> list[tuple[str, list[str], int]]:
        """Every run, point by point: ``(arm, overrides, seed)``."""
        return [(arm, point, seed) for arm, point in self.points() for seed in self.seeds]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seeds": list(self.seeds), "sets": list(self.sets)}


def claim(out: Path, plan: SweepPlan) -> None:
    """Make ``out`` this sweep's folder: a new or empty one, or one of the same sweep
    (resumed); ConfigError naming ``--out`` where it holds something else."""
    marker = out / SWEEP_FILE
    if marker.exists():
        if json.loads(marker.read_text()) != plan.to_json():
            raise ConfigError(f"--out {out} holds another sweep's runs (its {SWEEP_FILE} "
                              "differs): give another folder, or the same arguments to resume "
                              "it")
        return
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty and holds no sweep: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(plan.to_json(), indent=1))


def run_state(run_dir: Path) -> str:
    """``done`` (ended by itself), ``resume`` (has a checkpoint) or ``new`` (also: no folder
    yet)."""
    summary = run_dir / "summary.json"
    if summary.exists() and json.loads(summary.read_text()).get("stop_reason") in FINISHED:
        return "done"
    if list_checkpoints(run_dir / "checkpoints"):
        return "resume"
    return "new"


def run_sweep(plan: SweepPlan, out: Path, placement: Placement | None = None,
              say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Train every run of ``plan`` not finished yet under ``out`` as ``placement`` says, in
    the sweep's MLflow run (:mod:`~distmarl.studies.tracking`), and end with the report of
    its finished runs in ``out/report`` unless it was stopped. The outcome holds each ended
    run's summary, the failed runs and the stop signal. A cluster that could never hold one
    of the runs refuses the sweep (ConfigError) before anything starts."""
    placement = placement or Placement()
    claim(out, plan)
    room, needs, placement = _cluster_room(plan, placement)
    tracking = SweepTracking(out, load_config(plan.config, list(plan.sets)), plan.to_json())
    states = {(arm, seed): run_state(out / arm / f"seed-{seed}") for arm, _, seed in plan.runs()}
    launches = [_launch(plan, out, arm, point, seed, states[arm, seed] == "resume",
                        placement.train_args() + tracking.run_args(arm),
                        needs.get(f"{arm}/seed-{seed}", Need(0.0)))
                for arm, point, seed in plan.runs() if states[arm, seed] != "done"]
    cap = placement.parallel if room is not None else (placement.parallel or 1)
    outcome = run_launches(launches, room, cap, say)
    finished = find_runs([out]) if outcome.stop_signal is None else []
    if finished:  # failed runs aside
        report = Report(finished)
        report.write(out / "report")
        tracking.log_report(report, out / "report")
    tracking.finish("KILLED" if outcome.stop_signal is not None
                    else "FAILED" if outcome.failed else "FINISHED")
    return outcome


def _cluster_room(plan: SweepPlan, placement: Placement
                  ) -> tuple[Room | None, dict[str, Need], Placement]:
    """On a cluster (``placement``'s address, or ``$RAY_ADDRESS``): its room, each run's
    need by name (checked to fit), and the placement naming the cluster; else nothing to
    count."""
    from distmarl.runtime.driver.cluster import cluster_address, cluster_resources

    address = None if placement.local else cluster_address(placement.address)
    if address is None:
        return None, {}, placement
    cluster = cluster_resources(address)
    needs = {f"{arm}/seed-{seed}": Need.of(load_config(plan.config, run_sets(plan, point, seed)),
                                            cluster.get("GPU", 0.0))
             for arm, point, seed in plan.runs()}
    check_fits(needs, cluster)
    return Room.of(cluster), needs, replace(placement, address=address)


def _launch(plan: SweepPlan, out: Path, arm: str, point: list[str], seed: int, resume: bool,
            args: list[str], need: Need) -> RunLaunch:
    """The run of ``point`` and ``seed``: its folder made and named (``study.json``), a new
    run or (``resume``) the resumption of an interrupted one; ``args``: more ``distmarl
    train`` arguments (where it runs, its MLflow parent)."""
    run_dir = out / arm / f"seed-{seed}"
    where = ["--resume" if resume else "--run-dir", str(run_dir)]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / STUDY_FILE).write_text(json.dumps({"arm": arm, "point": point, "seed": seed}))
    command = [sys.executable, "-m", "distmarl.cli", "train", plan.config, "--quiet", *where,
               *[a for s in run_sets(plan, point, seed) for a in ("--set", s)], *args]
    return RunLaunch(f"{arm}/seed-{seed}", run_dir, command, need)


def run_sets(plan: SweepPlan, point: Sequence[str], seed: int) -> list[str]:
    """A run's ``--set`` values: the sweep's, its grid point's, its seed."""
    return [*plan.sets, *point, f"seed={seed}"]
