"""``train``: start (or join) Ray, run the coordinator, show progress, stop cleanly on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distmarl.collect.league_setup import league_setup
from distmarl.config import ConfigError, ExperimentConfig
from distmarl.factory import preflight
from distmarl.runtime.cluster import init_ray
from distmarl.runtime.coordinator import CoordinatorActor


def new_run_dir(directory: str, name: str) -> Path:
    """A new run directory under ``directory`` (``tracking.directory``): ``<time>-<name>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (Path(directory) / f"{stamp}-{name}").resolve()


def progress_line(p: dict[str, Any], width: int = 24) -> str:
    """The progress bar's line from :func:`~distmarl.runtime.coordinator.progress`."""
    done = p["env_steps"] / max(1, p["max_env_steps"])
    filled = int(width * min(1.0, done))
    best = "n/a" if p["best_fitness"] is None else f"{p['best_fitness']:.1f}"
    ratings = p.get("best_rating")
    if ratings:  # a league: each side's best rating
        sides = "  ".join(f"{side} {r:.1f}" for side, r in ratings.items())
        best = f"rating {best}" if len(ratings) == 1 else f"rating {sides}"
    else:
        best = f"best {best:>7}"
    return (f"\r[{'#' * filled}{'.' * (width - filled)}] {100 * done:5.1f}% "
            f"{p['env_steps']:>9,} env steps  {p['env_steps_per_s']:7,.0f}/s  "
            f"gen {p['generation']:>3}  {best}")


def train(cfg: ExperimentConfig, *, address: str | None = None, resume: str | Path | None = None,
          run_dir: str | Path | None = None, summary_json: str | Path | None = None,
          show_progress: bool = True, num_cpus: int | None = None,
          num_gpus: int | None = None,
          on_coordinator: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Train ``cfg``'s population; returns the final summary (also written to ``summary_json``).

    ``on_coordinator`` is called with the coordinator actor's handle once it exists (a soak or
    a dashboard can query ``progress`` or ``handles`` through it)."""
    spaces = preflight(cfg)  # config errors surface here, before Ray starts
    try:
        league_setup(cfg, spaces)  # sides, references and win_above against the env's agents
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if resume is not None:
        run_dir = Path(resume).resolve()
        if not (run_dir / "checkpoints").exists():
            raise FileNotFoundError(f"--resume {run_dir}: no checkpoints/ folder there")
    run_dir = (Path(run_dir).resolve() if run_dir is not None
               else new_run_dir(cfg.tracking.directory, cfg.name))
    run_dir.mkdir(parents=True, exist_ok=True)
    started_ray = not ray.is_initialized() and address is None
    info = init_ray(address, num_cpus=num_cpus, num_gpus=num_gpus, log_to_driver=True)
    here = ray.get_runtime_context().get_node_id()
    coord = CoordinatorActor.options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(json.loads(cfg.model_dump_json()), str(run_dir),
             str(run_dir / "checkpoints") if resume is not None else None, info.get("address"))
    if on_coordinator is not None:
        on_coordinator(coord)
    result = coord.run.remote()
    try:
        summary = _wait(coord, result, show_progress)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping and writing a final checkpoint...", file=sys.stderr)
        ray.get(coord.stop.remote())
        summary = ray.get(result)
    finally:
        if show_progress:
            print(file=sys.stderr)
    summary["ray"] = {"address": info.get("address"), "dashboard": info.get("dashboard_url")}
    if summary_json is not None:
        Path(summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_json).write_text(json.dumps(summary, indent=1, default=str))
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if started_ray:
        ray.shutdown()
    return summary


def _wait(coord: Any, result: Any, show_progress: bool) -> dict[str, Any]:
    while True:
        ready, _ = ray.wait([result], timeout=1.0)
        if ready:
            return ray.get(result)
        if show_progress:
            with contextlib.suppress(ray.exceptions.GetTimeoutError):
                line = progress_line(ray.get(coord.progress.remote(), timeout=5))
                print(line, end="", file=sys.stderr, flush=True)
