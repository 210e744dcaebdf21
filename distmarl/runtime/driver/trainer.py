"""``train``: run a population on Ray (started or joined) or in this process, show progress, stop
cleanly on SIGINT and SIGTERM."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distmarl.checkpoint import agent_spaces
from distmarl.config import ConfigError, ExperimentConfig
from distmarl.factory import preflight
from distmarl.league.setup import league_setup
from distmarl.runtime.coordinator.run import Coordinator, CoordinatorActor
from distmarl.runtime.driver.cluster import RayStartError, init_ray
from distmarl.runtime.driver.progress import ProgressDisplay
from distmarl.runtime.driver.resume import check_resume
from distmarl.runtime.driver.stopping import StopSignals, stop_reason
from distmarl.runtime.fleets.process_group import own_process_group
from distmarl.storage import Storage, StorageError, is_remote

log = logging.getLogger(__name__)

#: seconds the driver waits on the run between looks at signals and progress (a signal's
#: handler runs once the wait returns)
WAIT_S = 0.25
#: names tried for a new run directory within one second (``<time>-<name>-<n>``)
RUN_DIR_TRIES = 1000
#: where Ray unpacks a job's working dir (its cache, deleted when it fills)
RAY_UPLOADS = "runtime_resources/working_dir_files/"


def new_run_dir(directory: str | Path, name: str) -> Path:
    """A new, empty run directory under ``directory`` (``tracking.directory``):
    ``<time>-<name>``, or ``<time>-<name>-2``, ``-3``, ... when another run took that name in
    the same second. Each name is claimed by creating its folder (an atomic ``mkdir`` that
    fails where the folder exists), so two runs never share one."""
    parent = Path(directory).expanduser().resolve()
    parent.mkdir(parents=True, exist_ok=True)
    base = f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"
    for n in range(1, RUN_DIR_TRIES + 1):
        path = parent / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{parent}: {RUN_DIR_TRIES} run directories named {base}[-N] "
                          f"exist already")


def train(cfg: ExperimentConfig, *, address: str | None = None, resume: str | Path | None = None,
          run_dir: str | Path | None = None, summary_json: str | Path | None = None,
          show_progress: bool = True, num_cpus: int | None = None,
          num_gpus: int | None = None, dashboard: bool = True, local: bool = False,
          on_coordinator: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Train ``cfg``'s population; returns the final summary (also written to ``summary_json``
    and to the run directory's ``summary.json``). ``local``: the whole population in this
    process, without Ray (``address``, ``num_cpus``, ``num_gpus`` and ``dashboard`` then do not
    apply). ``dashboard=False`` starts a local Ray without its dashboard's web view, job
    server and state API (Ray keeps a minimal dashboard process): a lighter start.

    SIGINT and SIGTERM stop the run after the calls in flight, with a checkpoint and the
    tracking runs closed as ``KILLED`` (see :mod:`~distmarl.runtime.driver.stopping`); the summary's
    ``stop_reason`` then names the signal and ``stop_signal`` holds its number (None
    otherwise). ``on_coordinator`` is called with the coordinator once it exists: the actor's
    handle on Ray (a soak or a dashboard can query ``progress`` or ``handles`` through it),
    the :class:`~distmarl.runtime.coordinator.run.Coordinator` itself in process."""
    if local and (address is not None or num_cpus is not None or num_gpus is not None
                  or not dashboard):
        raise ConfigError("--local runs the population in this process, without Ray: "
                          "--address, --num-cpus, --num-gpus and --no-dashboard do not apply "
                          "to it")
    new = resume is None and run_dir is None
    with StopSignals() as signals:
        run_dir = _checked_run_dir(cfg, resume, run_dir)  # config errors: before Ray starts
        try:
            if local:
                summary = _run_local(cfg, run_dir, signals, resume=resume is not None,
                                     show_progress=show_progress, on_coordinator=on_coordinator)
            else:
                summary = _run(cfg, run_dir, signals, address=address,
                               resume=resume is not None, show_progress=show_progress,
                               num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard,
                               on_coordinator=on_coordinator)
        except (Stopped, RayStartError):
            if new:  # nothing was written: no empty run directory left behind
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
            raise
        summary["stop_signal"] = (signals.received if summary["stop_reason"] == signals.reason
                                  else None)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        _store_run(cfg, run_dir, summary)
        for path in ([] if summary_json is None else [Path(summary_json)]):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=1, default=str))
    return summary


def _store_run(cfg: ExperimentConfig, run_dir: Path, summary: dict[str, Any]) -> None:
    """Copy the run directory, but its checkpoints (each was copied once written), to
    ``tracking.storage``; what could not be is logged and goes to ``summary``'s
    ``storage_errors``."""
    if cfg.tracking.storage is None:
        return
    try:
        Storage(cfg.tracking.storage).child(run_dir.name).put_tree(run_dir, skip=("checkpoints",))
    except StorageError as err:
        log.warning("the run directory was not copied to %s: %s", cfg.tracking.storage, err)
        summary["storage_errors"] = [str(err)]
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


def _checked_run_dir(cfg: ExperimentConfig, resume: str | Path | None,
                     run_dir: str | Path | None) -> Path:
    """Check what can be checked without Ray (the env and algorithms build, the league fits
    the env, a resumed checkpoint fits the config); the run directory, created."""
    spaces = preflight(cfg)
    try:
        league_setup(cfg, spaces)  # sides, references and win_above against the env
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if cfg.tracking.storage is not None:
        _checked_storage(cfg.tracking.storage, "tracking.storage")
    if resume is not None:
        path = (_fetched_run(cfg, str(resume)) if is_remote(resume)
                else Path(resume).resolve())
        check_resume(path, cfg, agent_spaces(spaces[0], spaces[1]), cfg.league.enabled)
        return path
    if run_dir is not None:
        path = Path(run_dir).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = new_run_dir(cfg.tracking.directory, cfg.name)
    if RAY_UPLOADS in path.as_posix() and cfg.tracking.storage is None:
        warnings.warn(f"the run directory {path} is inside a Ray job's working-dir upload, "
                      "which Ray deletes when its cache fills: set tracking.directory to an "
                      "absolute folder, or tracking.storage", EphemeralRunWarning, stacklevel=3)
    return path


class EphemeralRunWarning(UserWarning):
    """A run directory that Ray may delete (inside a job's working-dir upload)."""


def _checked_storage(uri: str, what: str) -> Storage:
    """``uri``'s storage, checked (a :class:`ConfigError` naming ``what`` and the problem)."""
    try:
        storage = Storage(uri)
        storage.check()
    except StorageError as err:
        raise ConfigError(f"{what}: {err}") from None
    return storage


def _fetched_run(cfg: ExperimentConfig, uri: str) -> Path:
    """The run stored at ``uri`` copied to a run directory of the same name under
    ``tracking.directory`` (its latest checkpoint and everything but its checkpoints), and
    ``cfg``'s storage set to where it is kept, so it goes on being kept there."""
    storage = _checked_storage(uri, "--resume")
    parent, _, name = storage.uri.rpartition("/")
    local = Path(cfg.tracking.directory).expanduser().resolve() / name
    try:
        storage.fetch_run(local)
    except StorageError as err:
        raise ConfigError(f"--resume {uri}: {err}") from None
    cfg.tracking.storage = parent
    return local


def _run(cfg: ExperimentConfig, run_dir: Path, signals: StopSignals, *, address: str | None,
         resume: bool, show_progress: bool, num_cpus: int | None, num_gpus: int | None,
         dashboard: bool, on_coordinator: Callable[[Any], None] | None) -> dict[str, Any]:
    """Start (or join) Ray, run the coordinator to its end and return its summary. A local Ray
    gets a process group of its own, so a signal to the driver's group reaches the driver
    alone. A signal before the coordinator runs (in preflight, or while Ray starts) ends the
    run with nothing to save (:class:`Stopped`)."""
    if signals.received is not None:  # came during the checks: Ray is not started at all
        raise Stopped(signals.received)
    started_ray = not ray.is_initialized() and address is None
    with own_process_group(started_ray) as group:
        signals.group = group
        info = init_ray(address, num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard,
                        log_to_driver=True)
    signals.install()  # again: ray.init's core worker replaced the SIGTERM handler
    try:
        if signals.received is not None:
            raise Stopped(signals.received)
        here = ray.get_runtime_context().get_node_id()
        coord = CoordinatorActor.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        ).remote(json.loads(cfg.model_dump_json()), str(run_dir),
                 str(run_dir / "checkpoints") if resume else None, info.get("address"))
        if on_coordinator is not None:
            on_coordinator(coord)
        result = coord.run.remote()

        def progress() -> dict[str, Any] | None:
            with contextlib.suppress(ray.exceptions.GetTimeoutError):
                return dict(ray.get(coord.progress.remote(), timeout=5))
            return None

        _follow(lambda timeout: bool(ray.wait([result], timeout=timeout)[0]),
                lambda reason: ray.get(coord.stop.remote(reason, interrupted=True)),
                progress, show_progress, signals)
        summary = dict(ray.get(result))
    finally:
        if started_ray:
            ray.shutdown()
            signals.group = None
            signals.install()  # again: shutting Ray down gave SIGTERM its default back
    summary["ray"] = {"address": info.get("address"), "dashboard": info.get("dashboard_url")}
    return summary


def _run_local(cfg: ExperimentConfig, run_dir: Path, signals: StopSignals, *, resume: bool,
               show_progress: bool, on_coordinator: Callable[[Any], None] | None
               ) -> dict[str, Any]:
    """Run the population in this process (:class:`~distmarl.runtime.fleets.local_fleet.LocalFleet`)
    and return its summary. The run goes on in a thread while this one, the main thread, takes
    the signals and draws the progress bar."""
    if signals.received is not None:
        raise Stopped(signals.received)
    coord = Coordinator(json.loads(cfg.model_dump_json()), str(run_dir),
                        str(run_dir / "checkpoints") if resume else None, local=True)
    if on_coordinator is not None:
        on_coordinator(coord)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["summary"] = coord.run()
        except BaseException as err:  # handed to the main thread, raised there
            outcome["error"] = err

    thread = threading.Thread(target=run, name="distmarl-run", daemon=True)
    thread.start()

    def ended(timeout: float) -> bool:
        thread.join(timeout)
        return not thread.is_alive()

    _follow(ended, lambda reason: coord.stop(reason, interrupted=True), coord.progress,
            show_progress, signals)
    if "error" in outcome:
        raise outcome["error"]
    return dict(outcome["summary"], ray=None)


class Stopped(Exception):
    """A stop signal came before the run had started: nothing was trained or saved."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"{stop_reason(signum)} before the run started: nothing was saved")
        self.signum = signum


def _follow(ended: Callable[[float], bool], stop: Callable[[str], Any],
            progress: Callable[[], dict[str, Any] | None], show_progress: bool,
            signals: StopSignals) -> None:
    """Wait until the run has ``ended`` (asked with a timeout); a stop signal meanwhile asks it
    to ``stop`` (once, with the signal's reason); with ``show_progress`` the progress line
    (``progress()``: None when it could not be read) is redrawn every second
    (:class:`~distmarl.runtime.driver.progress.ProgressDisplay`)."""
    asked, shown = False, 0.0
    display = ProgressDisplay()
    try:
        while not ended(WAIT_S):
            if signals.received is not None and not asked:
                stop(signals.reason or "stopped")
                asked = True
            if show_progress and time.monotonic() - shown >= 1.0:
                shown = time.monotonic()
                p = progress()
                if p is not None:
                    display.show(p)
        if show_progress and (p := progress()) is not None:
            display.show(p)  # where the run ended
    finally:
        display.close()
