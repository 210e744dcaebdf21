"""``distmarl sweep``: every arm of a config trained with every seed, resumable, ending in a
report (:mod:`distmarl.studies.report`).

The plan and the folder are :mod:`~distmarl.studies.plan`'s: ``<arm>/seed-<s>`` per run,
each with a ``study.json`` naming its arm. Run again with the same arguments (or more arms and
seeds), a sweep skips every finished run and resumes an interrupted one from its last
checkpoint. The runs are ``distmarl train`` processes, one after another or side by side
(:mod:`~distmarl.studies.runner`); a signal stops the runs in flight as it stops any run (a
checkpoint, then the exit status of the signal), and the sweep with them.

    plan = SweepPlan.parse("tiny.yaml", "0-2", grid=["training.lr=0.01,0.001"])
    outcome = run_sweep(plan, Path("sweeps/lr"), Placement(local=True, parallel=2))
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from distmarl.checkpoint import list_checkpoints
from distmarl.config import load_config
from distmarl.studies.plan import SweepPlan, SweepRun, claim
from distmarl.studies.report import STUDY_FILE, Report, find_runs
from distmarl.studies.runner import Outcome, Placement, RunLaunch, run_launches
from distmarl.studies.schedule import Need, Room, check_fits
from distmarl.studies.tracking import SweepTracking

#: how a run ends that a sweep counts as finished
FINISHED = ("max_steps", "target")


def finished(summary: dict[str, Any] | None) -> bool:
    """Whether a run with this summary (None: none yet) ended by itself."""
    return summary is not None and summary.get("stop_reason") in FINISHED


def run_state(run: SweepRun) -> str:
    """``done`` (ended by itself), ``resume`` (has a checkpoint) or ``new`` (also: no folder
    yet)."""
    if finished(run.summary()):
        return "done"
    if list_checkpoints(run.run_dir / "checkpoints"):
        return "resume"
    return "new"


def finished_runs(plan: SweepPlan, out: Path) -> list[tuple[SweepRun, dict[str, Any]]]:
    """Each run of ``plan`` in ``out`` that has finished, with its summary (read once), in
    the plan's order: what a study reads its own figures from."""
    return [(run, summary) for run in plan.runs(out)
            if finished(summary := run.summary()) and summary is not None]


def run_sweep(plan: SweepPlan, out: Path, placement: Placement | None = None,
              say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Train every run of ``plan`` not finished yet under ``out`` as ``placement`` says, in
    the sweep's MLflow run (:mod:`~distmarl.studies.tracking`), and end with the report of
    the folder's finished runs in ``out/report`` unless it was stopped. The outcome holds each
    ended run's summary, the failed runs and the stop signal. A cluster that could never hold
    one of the runs refuses the sweep (ConfigError) before anything starts."""
    placement = placement or Placement()
    claim(out, plan)
    room, needs, placement = _cluster_room(plan, out, placement)
    tracking = SweepTracking(out, load_config(plan.config, list(plan.sets)),
                             {"config": plan.config, "sets": list(plan.sets)})
    states = {run.name: run_state(run) for run in plan.runs(out)}
    done = sum(state == "done" for state in states.values())
    if done:
        say(f"{done} of {len(states)} runs already finished in {out} (kept)")
    launches = [_launch(plan, run, states[run.name] == "resume",
                        placement.train_args() + tracking.run_args(run.arm),
                        needs.get(run.name, Need(0.0)))
                for run in plan.runs(out) if states[run.name] != "done"]
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


def _cluster_room(plan: SweepPlan, out: Path, placement: Placement
                  ) -> tuple[Room | None, dict[str, Need], Placement]:
    """On a cluster (``placement``'s address, or ``$RAY_ADDRESS``): its room, each run's
    need by name (checked to fit), and the placement naming the cluster; else nothing to
    count."""
    from distmarl.runtime.driver.cluster import cluster_address, cluster_resources

    address = None if placement.local else cluster_address(placement.address)
    if address is None:
        return None, {}, placement
    cluster = cluster_resources(address)
    needs = {run.name: Need.of(load_config(plan.config, plan.run_sets(run)),
                               cluster.get("GPU", 0.0))
             for run in plan.runs(out)}
    check_fits(needs, cluster)
    return Room.of(cluster), needs, replace(placement, address=address)


def _launch(plan: SweepPlan, run: SweepRun, resume: bool, args: list[str], need: Need
            ) -> RunLaunch:
    """``run``'s launch: its folder made and named (``study.json``), a new run or
    (``resume``) the resumption of an interrupted one; ``args``: more ``distmarl train``
    arguments (where it runs, its MLflow parent)."""
    where = ["--resume" if resume else "--run-dir", str(run.run_dir)]
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / STUDY_FILE).write_text(json.dumps(
        {"arm": run.arm, "overrides": list(run.overrides), "seed": run.seed}))
    command = [sys.executable, "-m", "distmarl.cli", "train", plan.config, "--quiet", *where,
               *[a for s in plan.run_sets(run) for a in ("--set", s)], *args]
    return RunLaunch(run.name, run.run_dir, command, need)
