"""The coordinator's tracking and checkpoints: metrics in batches, artifacts, resume.

Everything here runs in the coordinator's process. MLflow failures never stop training (the
tracker queues and retries); a checkpoint holds every member's state, the coordinator's
counters, RNG, lineage and MLflow run ids, and a buffer snapshot.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

import distmarl
from distmarl.checkpoint import load_checkpoint, save_checkpoint
from distmarl.hpo import Lineage
from distmarl.runtime.members import MemberState
from distmarl.tracking.base import NullTracker

if TYPE_CHECKING:
    from distmarl.runtime.coordinator import Coordinator

log = logging.getLogger(__name__)


def interval(value: int | str, max_steps: int, parts: int) -> int:
    """``"auto"`` -> ``max_steps // parts`` (at least 1); ``<= 0`` disables (returns 0)."""
    if value == "auto":
        return max(1, max_steps // parts)
    return max(0, int(value))


#: tries to create the MLflow runs before a run goes on untracked, and the pause between them
TRACKING_START_ATTEMPTS = 3
TRACKING_RETRY_S = 2.0


def make_tracker(coord: Coordinator) -> Any:
    t = coord.cfg.tracking
    if not t.mlflow:
        return NullTracker()
    from distmarl.tracking.mlflow import MlflowTracker, resolve_tracking_uri

    uri = resolve_tracking_uri(coord.run_dir, t.mlflow_uri)
    name = t.experiment_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{coord.cfg.algorithm.name}"
    resume = getattr(coord, "_resume_tracking", None)
    return MlflowTracker(uri, name, coord.cfg.name, artifact_dir=coord.run_dir / "mlartifacts",
                         resume=resume)


def start_tracking(coord: Coordinator) -> None:
    cfg = coord.cfg
    tags = {"distmarl.version": distmarl.__version__, "env": cfg.env.spec,
            "algorithm": cfg.algorithm.name, "ray.address": str(coord.ray_address or "local"),
            "population": str(cfg.population.size)}
    commit = _git_commit()
    if commit:
        tags["git.commit"] = commit
    for attempt in range(1, TRACKING_START_ATTEMPTS + 1):
        try:
            coord.tracker.start(cfg.flat(), tags, [m.hp for m in coord.members])
            break
        except Exception as err:  # noqa: BLE001 - tracking must not stop training
            if attempt == TRACKING_START_ATTEMPTS:
                log.warning("MLflow could not start (%s): tracking is off for this run", err)
                coord.tracker = NullTracker()
            else:  # a busy server may miss one request's timeout; start() resumes where it was
                log.warning("MLflow start, attempt %d failed (%s): retrying", attempt, err)
                time.sleep(TRACKING_RETRY_S)
    coord.run_dir.mkdir(parents=True, exist_ok=True)
    (coord.run_dir / "config.yaml").write_text(cfg.to_yaml())
    coord._write_every = interval(cfg.tracking.write_interval, cfg.training.max_steps, 100)
    coord._ckpt_every = interval(cfg.tracking.checkpoint_interval, cfg.training.max_steps, 10)
    step = member_step(coord)
    coord._next_write = step + coord._write_every if coord._write_every else None
    coord._next_ckpt = step + coord._ckpt_every if coord._ckpt_every else None
    coord._hp_logged = [dict(m.hp) for m in coord.members]


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def member_step(coord: Coordinator) -> int:
    """The step metrics are logged at: env steps per member (the mean over members)."""
    return int(sum(m.env_steps for m in coord.members) / max(1, len(coord.members)))


def metrics(coord: Coordinator) -> dict[str, float]:
    out: dict[str, float] = {
        "population/env_steps": coord.total_env_steps,
        "population/env_steps_per_s": coord.env_steps_per_s(),
        "population/generation": coord.generation,
    }
    latest = [m.fitness[-1] for m in coord.members if m.fitness]
    if latest:
        out["population/best_fitness"] = max(latest)
        out["population/mean_fitness"] = sum(latest) / len(latest)
    for i, m in enumerate(coord.members):
        p = f"member/{i}/"
        out[p + "env_steps"] = m.env_steps
        out[p + "updates"] = m.updates
        if m.train_seconds > 0:
            out[p + "updates_per_s"] = m.updates / m.train_seconds
        if m.fitness:
            out[p + "fitness"] = m.fitness[-1]
        score = m.mean_score()
        if score is not None:
            out[p + "episode_score"] = score
        out |= {p + k: v for k, v in m.metrics.items()}
        if m.hp != coord._hp_logged[i]:  # after a mutation: the new values, with the step
            out |= {p + f"hp/{k}": float(v) for k, v in m.hp.items() if isinstance(v, int | float)}
            coord._hp_logged[i] = dict(m.hp)
    return out


def maybe_write(coord: Coordinator) -> None:
    step = member_step(coord)
    if coord._next_write is not None and step >= coord._next_write:
        coord.tracker.log_metrics(metrics(coord), step)
        coord._next_write = step + coord._write_every
    if coord._next_ckpt is not None and step >= coord._next_ckpt:
        checkpoint(coord)
        coord._next_ckpt = step + coord._ckpt_every


def coordinator_state(coord: Coordinator) -> dict[str, Any]:
    return {
        "config": json.loads(coord.cfg.model_dump_json()),
        "generation": coord.generation,
        "evolutions": getattr(coord, "evolutions", 0),
        "total_env_steps": coord.total_env_steps,
        "buffer_rows": coord.buffer_rows,
        "members": [m.to_json() for m in coord.members],
        "fitness_history": coord.fitness_history,
        "lineage": coord.lineage.to_json(),
        "rng": coord.rng.bit_generator.state,
        "mlflow": coord.tracker.run_ids(),
        "copies": coord.copy_log,
        "events": coord.events,
    }


def checkpoint(coord: Coordinator) -> Path:
    """Every member's full state, the coordinator's state and the buffer, at this step."""
    from distmarl.runtime.faults import check_buffer, check_learners, get_with_retry

    check_learners(coord)  # a learner Ray restarted is restored before its state is saved
    check_buffer(coord)
    states = [get_with_retry(lr.get_state.remote) for lr in coord.learners]
    buffer_state = get_with_retry(coord.buffer.state_dict.remote)
    path = save_checkpoint(coord.run_dir / "checkpoints", coord.total_env_steps,
                           coordinator_state(coord), states, buffer_state,
                           keep_last=coord.cfg.tracking.keep_last)
    coord.last_checkpoint = str(path)
    return path


def restore(coord: Coordinator, path: str) -> None:
    """Continue a run: learners, buffer, counters, RNG, lineage and MLflow runs come back.
    On-policy fragments that were collected but not learned at the checkpoint are dropped
    (the coordinator did not count them all)."""
    from distmarl.runtime.faults import resync_on_policy

    ckpt = load_checkpoint(Path(path))
    meta = ckpt.meta
    if len(ckpt.members) != len(coord.learners):
        raise ValueError(f"checkpoint {ckpt.path} holds {len(ckpt.members)} members, the config "
                         f"asks for {len(coord.learners)}")
    ray.get([lr.load_state.remote(s) for lr, s in zip(coord.learners, ckpt.members)])
    if ckpt.buffer_state is not None:
        ray.get(coord.buffer.load_state_dict.remote(ckpt.buffer_state))
    coord.members = [MemberState.from_json(m) for m in meta["members"]]
    evo, max_steps = coord.cfg.evolution.evo_steps, coord.cfg.training.max_steps
    for m in coord.members:  # a generation finished at the boundary: go on to the next one
        if m.evaluated_at == m.boundary and m.boundary < max_steps:
            m.boundary = min(m.boundary + evo, max_steps)
    coord.generation = int(meta["generation"])
    coord.evolutions = int(meta.get("evolutions", 0))
    coord.total_env_steps = int(meta["total_env_steps"])
    coord.buffer_rows = int(meta["buffer_rows"])
    coord.fitness_history = meta["fitness_history"]
    coord.lineage = Lineage.from_json(meta["lineage"])
    coord.rng.bit_generator.state = meta["rng"]
    coord.copy_log = meta.get("copies", [])
    coord.events = meta.get("events", [])
    if meta.get("mlflow", {}).get("parent") and coord.cfg.tracking.mlflow:
        coord._resume_tracking = meta["mlflow"]
        coord.tracker = make_tracker(coord)
    coord.resumed_from = str(ckpt.path)
    resync_on_policy(coord, list(range(len(coord.members))))


def finish(coord: Coordinator, failed: bool = False) -> None:
    """Final checkpoint, artifacts (config, lineage, plots), close the MLflow runs."""
    tracker = getattr(coord, "tracker", None)
    if tracker is None:
        return
    try:
        if not failed and coord.members:
            tracker.log_metrics(metrics(coord), member_step(coord))
            checkpoint(coord)
            write_artifacts(coord)
            tracker.flush()
            log_elite_model(coord)
    finally:
        if hasattr(tracker, "spill"):
            tracker.finish("FAILED" if failed else "FINISHED",
                           spill=coord.run_dir / "mlflow-unsent.jsonl")
        else:
            tracker.finish("FAILED" if failed else "FINISHED")


def torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def write_artifacts(coord: Coordinator) -> None:
    from distmarl.tracking.plots import plot_family_tree, plot_fitness

    out = coord.run_dir
    lineage_path = out / "lineage.json"
    lineage_path.write_text(json.dumps(coord.lineage.to_json(), indent=1))
    files = [out / "config.yaml", lineage_path,
             plot_fitness(coord.fitness_history, out / "fitness.png"),
             plot_family_tree(coord.lineage.to_json(), out / "family_tree.png")]
    for f in files:
        coord.tracker.log_artifact(f)
    if getattr(coord, "last_checkpoint", None):
        coord.tracker.log_artifact(Path(coord.last_checkpoint), "checkpoint")


def log_elite_model(coord: Coordinator) -> str | None:
    """The best member (by latest fitness) through ``mlflow.pytorch.log_model`` on the parent
    run; returns the model URI. Best effort: a failure is logged, not raised."""
    tracker = coord.tracker
    if not hasattr(tracker, "parent_id") or tracker.parent_id is None:
        return None
    latest = [m.fitness[-1] if m.fitness else float("-inf") for m in coord.members]
    elite = max(range(len(latest)), key=lambda i: latest[i])
    try:
        import mlflow

        from distmarl.factory import make_algorithm
        from distmarl.tracking.policy_model import PolicyModel

        algo = make_algorithm(coord.cfg.algorithm, coord.spaces, seed=coord.cfg.seed)
        algo.load_state_dict(ray.get(coord.learners[elite].get_state.remote())["algo"])
        mlflow.set_tracking_uri(tracker.uri)
        with mlflow.start_run(run_id=tracker.parent_id):
            # "pickle": the policy acts through numpy (act), which pt2's graph tracing cannot
            # follow. Load it only from a tracking server you trust; checkpoints are the safe path.
            info = mlflow.pytorch.log_model(
                PolicyModel(algo), name="elite_policy", serialization_format="pickle",
                pip_requirements=[f"distmarl=={distmarl.__version__}", "numpy",
                                  f"torch=={torch_version()}"])
            mlflow.set_tag("distmarl.elite_member", str(elite))
        coord.elite_model_uri = info.model_uri
        return info.model_uri
    except Exception as err:  # noqa: BLE001 - tracking must not fail the run
        log.warning("could not log the elite model to MLflow: %s", err)
        return None
