"""distmarl: a Ray-distributed population trainer for multi-agent reinforcement learning.

The Python API::

    from distmarl import load_config, train

    summary = train(load_config("examples/configs/tiny.yaml", ["population.size=4"]))
    best = max(summary["members"], key=lambda m: m["fitness"][-1])

``import distmarl`` imports no Ray (nor any other part of the package): :func:`train` imports
the runtime when it is called, and ``load_config`` (:func:`distmarl.config.load_config`) is
looked up on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distmarl.version import __version__

if TYPE_CHECKING:
    from distmarl.config import ExperimentConfig, load_config

__all__ = ["__version__", "load_config", "train"]


def train(cfg: ExperimentConfig | str | Path, overrides: Sequence[str] = (), *,
          address: str | None = None, resume: str | Path | None = None,
          run_dir: str | Path | None = None, summary_json: str | Path | None = None,
          show_progress: bool = True, num_cpus: int | None = None, num_gpus: int | None = None,
          dashboard: bool = True, local: bool = False,
          on_coordinator: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Train a population, as ``distmarl train`` does, and return the run's summary.

    ``cfg`` is an :class:`~distmarl.config.ExperimentConfig` or the path of a YAML config;
    ``overrides`` (``"key.path=value"`` strings) apply to a path only (for a config object,
    pass them to :func:`load_config`). The keywords go to
    :func:`distmarl.runtime.driver.trainer.train`: ``address`` joins a running Ray cluster
    (default: ``$RAY_ADDRESS``, else a local Ray sized by ``num_cpus`` / ``num_gpus``, its
    dashboard's web view off where ``dashboard=False``, shut down again at the end);
    ``resume`` continues the run directory of an earlier run from its last
    checkpoint; ``run_dir`` places the run (default: a new folder under
    ``tracking.directory``); ``summary_json`` also writes the summary there;
    ``show_progress`` draws a progress bar on stderr; ``local`` runs the whole population in
    this process without Ray (notebooks, debugging, tests: a seeded run gives the same summary
    again); ``on_coordinator`` is called with the coordinator (the actor's handle on Ray, the
    object itself in process) once it exists.

    The summary is plain data (also written to ``<run_dir>/summary.json``), among its keys:

    * ``members``: the final population, one dict per member with ``fitness`` (its fitness at
      each generation, oldest first), ``hp`` (its hyperparameters at the end), ``env_steps``
      and ``updates``;
    * ``best_fitness``: the best member's latest fitness;
    * ``run_dir``: the run's directory (config, checkpoints, lineage, plots);
    * ``env_steps``, ``updates``, ``generations``: totals over the population;
    * ``stop_reason`` (``"max_steps"``, ``"target"``, ``"stopped by SIGTERM"``, ...) and
      ``stop_signal`` (the signal's number when one stopped the run, else None),
      ``wall_seconds``,
      ``setup_seconds`` (start-up: actors started, weights published; ``setup_phases``
      splits it) and ``env_steps_per_s``;
    * ``learner_devices``: each learner's torch device, ``learner_steps`` how it runs its
      update step (``resources.learner_step``), ``compile_seconds`` the time spent compiling
      or capturing steps (counted in the train calls' time) and ``step_fallbacks`` the
      compilations or captures that failed (those steps ran eagerly).

    A config that does not load, or that its env and algorithm cannot run, raises
    :class:`~distmarl.config.ConfigError` (a ``ValueError`` naming the field) before Ray
    starts.
    """
    from distmarl.config import load_config
    from distmarl.runtime.driver.trainer import train as run_training

    if isinstance(cfg, (str, Path)):
        cfg = load_config(cfg, overrides)
    elif overrides:
        raise ValueError("overrides apply to a config path; for an ExperimentConfig pass them "
                         "to load_config(path, overrides)")
    return run_training(cfg, address=address, resume=resume, run_dir=run_dir,
                        summary_json=summary_json, show_progress=show_progress,
                        num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard,
                        local=local, on_coordinator=on_coordinator)


def __getattr__(name: str) -> Any:
    """``load_config`` on first use, so that ``import distmarl`` stays light."""
    if name == "load_config":
        from distmarl.config import load_config

        return load_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
