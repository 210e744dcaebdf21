"""A sweep's MLflow run: the parent of its training runs, which carries the report.

The sweep opens one run (named as its folder) in the store and experiment its config tracks
into (``tracking.mlflow_uri``, ``$MLFLOW_TRACKING_URI``, else a SQLite store in the sweep's
folder), with the sweep's config and ``--set`` as parameters and its ``sweep.json`` (arms and
seeds) as an artifact. Each training run's parent run is nested under
it (``tracking.parent_run``), tagged with its arm (``distmarl.arm``); the arm's overrides and
the seed are among its parameters, as every config value is. The member runs stay nested
under their training run. Its ids are kept in ``sweep-run.json``, so a resumed sweep goes on
in the same run. With ``tracking.mlflow: false`` there is none (:class:`NullTracker`).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from distmarl.config import ExperimentConfig, flatten_dict
from distmarl.studies.plan import SWEEP_FILE
from distmarl.studies.report import Report
from distmarl.tracking.base import NullTracker, Tracker
from distmarl.tracking.mlflow import make_tracker

log = logging.getLogger(__name__)

#: where a sweep's folder keeps its MLflow run's ids
SWEEP_RUN_FILE = "sweep-run.json"
#: the tags naming a training run's sweep and arm
SWEEP_TAG, ARM_TAG = "distmarl.sweep", "distmarl.arm"


class SweepTracking:
    """The sweep's MLflow run in ``out`` for ``base`` (the config without arm or seed), its
    parameters ``plan`` (what never changes in a sweep's folder: the config and ``--set``),
    the folder's ``sweep.json`` (its arms and seeds) an artifact."""

    def __init__(self, out: Path, base: ExperimentConfig, plan: dict[str, Any]) -> None:
        self.out = out
        self.experiment = base.tracking.experiment_name or base.name
        self.tags = dict(base.tracking.tags)  # the config's own, kept on every run
        ids_file = out / SWEEP_RUN_FILE
        stored = json.loads(ids_file.read_text()) if ids_file.exists() else None
        self.tracker: Tracker = make_tracker(base.tracking, base.name, out, resume=stored)
        try:
            ids = self.tracker.start(flatten_dict({"sweep": plan}),
                                     {SWEEP_TAG: out.name, **base.tracking.tags}, [])
        except Exception as err:  # the runs track on their own, as any run does
            log.warning("MLflow could not start the sweep's run (%s): its runs are not "
                        "nested under one", err)
            self.tracker, ids = NullTracker(), {}
        self.parent: str | None = ids.get("parent")
        self.uri: str | None = ids.get("uri")
        if self.parent is not None:
            ids_file.write_text(json.dumps(ids))
            # every arm and seed, as the folder holds them now (params never change, and a
            # sweep extended by arms goes on in the same run)
            self.tracker.log_artifact(out / SWEEP_FILE)

    def run_args(self, arm: str) -> list[str]:
        """A training run's arguments that nest it under the sweep's run (none without
        tracking)."""
        from distmarl.tracking.mlflow import is_local_store

        if self.parent is None or self.uri is None:
            return []
        tags = {**self.tags, SWEEP_TAG: self.out.name, ARM_TAG: arm}
        # a server's URI (which may hold credentials) reaches the run as it reached the sweep,
        # by the config or the environment, never on a command line
        store = ["--mlflow-uri", self.uri] if is_local_store(self.uri) else []
        # JSON strings: YAML would read an id such as 123e45 as a number
        return [*store, "--set", f"tracking.parent_run={json.dumps(self.parent)}",
                "--set", f"tracking.experiment_name={json.dumps(self.experiment)}",
                "--set", f"tracking.tags={json.dumps(tags)}"]

    def log_report(self, report: Report, folder: Path) -> None:
        """Each arm's figures as metrics (``arm/<arm>/mean``, ``/iqm``) and the report's
        files under ``report/``."""
        self.tracker.log_metrics(report_metrics(report), step=len(report.runs))
        self.tracker.log_artifact(folder, "report")

    def finish(self, status: str) -> None:
        """Close the run: ``FINISHED``, ``KILLED`` (stopped) or ``FAILED``."""
        self.tracker.finish(status)


def report_metrics(report: Report) -> dict[str, float]:
    """``arm/<arm>/mean`` and ``arm/<arm>/iqm`` of each arm, its name in the characters MLflow
    keys allow (others as ``_``)."""
    out: dict[str, float] = {}
    for arm in report.arms:
        key = re.sub(r"[^\w\-. /]", "_", arm)
        out[f"arm/{key}/mean"] = float(report.scores(arm).mean())
        out[f"arm/{key}/iqm"] = report.iqm(arm).value
    return out
