"""What a run leaves behind: metrics at their cadence, checkpoints, artifacts, the elite model,
videos, and a resume from a checkpoint.

Everything here runs in the coordinator's process. Tracking failures never stop training (the
tracker queues and retries). A checkpoint holds the run's config (as plain data), every member's
learner state, the run's counters (:class:`~distmarl.runtime.logic.run_state.RunState`), the
generations' RNG and lineage, the MLflow run ids, and a buffer snapshot: the learner states
pass through this process as data on their way to the checkpoint's files (and back, on a
resume), never loaded into a learner here. The elite model and the videos are built from the
members' published weights (:class:`~distmarl.runtime.records.policies.PublishedPolicies`:
actors only); the videos play in envs built here (:mod:`~distmarl.runtime.records.videos`).
"""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import yaml

from distmarl.algorithms import Algorithm
from distmarl.checkpoint import is_buffer_file, load_checkpoint
from distmarl.config import TrackingConfig, flatten_dict
from distmarl.hpo import Lineage
from distmarl.runtime.fleets.protocol import Fleet
from distmarl.runtime.hooks.base import GameHooks
from distmarl.runtime.logic.run_state import RunState
from distmarl.runtime.logic.time_spent import time_metrics
from distmarl.runtime.records.checkpoints import CheckpointWriter, Taken
from distmarl.runtime.records.policies import PublishedPolicies
from distmarl.runtime.records.videos import VideoRecorder
from distmarl.storage import Storage
from distmarl.tracking.base import NullTracker, Tracker
from distmarl.tracking.mlflow import make_tracker
from distmarl.version import __version__

log = logging.getLogger(__name__)

#: the parent run's tag holding the run directory's absolute path
RUN_DIR_TAG = "distmarl.run_dir"
#: tries to create the MLflow runs before a run goes on untracked, and the pause between them
TRACKING_START_ATTEMPTS = 3
TRACKING_RETRY_S = 2.0
#: seconds a run's end waits for its last checkpoint to be written and copied to storage
FINAL_CHECKPOINT_S = 600.0


def interval(value: int | str, max_steps: int, parts: int) -> int:
    """``"auto"`` -> ``max_steps // parts`` (at least 1); ``<= 0`` disables (returns 0)."""
    if value == "auto":
        return max(1, max_steps // parts)
    return max(0, int(value))


def final_game_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """A league's final games as metrics: ``final/member/3/vs/ref/minimax/win`` (and draw,
    loss), random play's on a side as ``final/ref/random/prey/vs/ref/random/win``."""
    out: dict[str, float] = {}
    for r in rows:
        for k in ("win", "draw", "loss"):
            side = "" if r["side"] is None or r["kind"] == "member" else f"{r['side']}/"
            out[f"final/{r['player']}/{side}vs/{r['opponent']}/{k}"] = r[k]
    return out


class EvolutionRecords(Protocol):
    """What the recorder reads of the evolution between generations (the coordinator's
    :class:`~distmarl.runtime.coordinator.generations.Generations`): its game hooks, lineage,
    and state for checkpoints."""

    game: GameHooks
    lineage: Lineage

    def state_dict(self) -> dict[str, Any]: ...

    def snapshot_weights(self) -> dict[str, dict[str, Any]]: ...

    def load_state_dict(self, d: dict[str, Any],
                        snapshots: dict[str, dict[str, Any]] | None = None) -> None: ...


class Recorder:
    """Metrics, checkpoints and artifacts of the run ``name`` in ``run_dir``, as ``tracking``
    says.

    ``config`` is the run's whole config as plain data (its JSON form), kept as it is: written
    to ``config.yaml``, logged as the tracking run's parameters and stored in every checkpoint.
    ``tags`` go to the tracking run (the git commit is added). ``max_steps`` (env steps per
    member) sets the ``"auto"`` cadences, and with ``evo_steps`` (per member) the boundaries
    after a resume.
    ``new_policy(name)`` builds a fresh algorithm of that name, which the elite model and the
    videos load a member's published weights into. ``agent_spaces`` (each agent's spaces as text, see
    :func:`~distmarl.runtime.driver.resume.agent_spaces`) go into every checkpoint, so a resume can
    check its env against it before Ray starts."""

    def __init__(self, tracking: TrackingConfig, run_dir: Path, *, name: str,
                 config: dict[str, Any], tags: dict[str, str], max_steps: int,
                 evo_steps: Sequence[int],
                 new_policy: Callable[[str], Algorithm], state: RunState, fleet: Fleet,
                 generations: EvolutionRecords,
                 agent_spaces: dict[str, dict[str, str]] | None = None) -> None:
        self.tracking, self.run_dir, self.name = tracking, run_dir, name
        self.agent_spaces = agent_spaces
        self.config, self.tags = config, tags
        #: each member acting with its published weights (the elite model's, the videos')
        self.policies = PublishedPolicies(state, fleet.store, new_policy)
        self.max_steps, self.evo_steps = max_steps, evo_steps
        self.state, self.fleet, self.generations = state, fleet, generations
        self.tracker: Tracker = NullTracker()
        self.resume_ids: dict[str, Any] | None = None
        self.resumed_from: str | None = None
        self.last_checkpoint: str | None = None
        #: where the run is kept besides its run directory (``tracking.storage``)
        self.storage = (None if tracking.storage is None
                        else Storage(tracking.storage).child(run_dir.name))
        self.checkpoints = CheckpointWriter(run_dir / "checkpoints", tracking.keep_checkpoints,
                                            self.storage)
        #: seconds training waited for checkpoints' states to be taken (and handed over)
        self.checkpoint_blocked_s = 0.0
        self.elite_model_uri: str | None = None
        #: ``time/<kind>/<share>`` metrics, once the run counted where its time went
        self.time_metrics: dict[str, float] = {}
        self.write_every = interval(tracking.write_interval, max_steps, 100)
        self.ckpt_every = interval(tracking.checkpoint_interval, max_steps, 10)
        self.next_write: int | None = None
        self.next_ckpt: int | None = None
        self.next_video: int | None = None
        self.videos = VideoRecorder(config, run_dir, self.policies, lambda: self.tracker)

    # ------------------------------------------------------------------ start
    def restore(self, path: str) -> None:
        """Continue a run: learners, buffer, counters, RNG, lineage and MLflow runs come back.
        On-policy fragments collected but not learned at the checkpoint are dropped (the
        scheduler did not count them all)."""
        ckpt = load_checkpoint(Path(path))
        self.fleet.load(ckpt.members, ckpt.buffer_state)
        self.state.load_state_dict(ckpt.meta)
        self.state.final = None  # the earlier run's: this one ends with its own
        max_steps = self.max_steps
        for m in self.state.members:  # a generation finished at the boundary: go on to the next
            if m.evaluated_at == m.boundary and m.boundary < max_steps:
                m.next_boundary(self.evo_steps[m.member], max_steps)
        self.generations.load_state_dict(ckpt.meta, ckpt.snapshots)
        if ckpt.meta.get("mlflow", {}).get("parent"):
            self.resume_ids = ckpt.meta["mlflow"]
        self.resumed_from = str(ckpt.path)
        self.fleet.resync(list(range(len(self.state.members))))

    def start(self) -> None:
        """Open the tracking runs (retried; tracking goes off rather than stop the run), write
        the config, and set the metric and checkpoint cadence from the current step."""
        tags = {**self.tags, **self.tracking.tags, RUN_DIR_TAG: str(self.run_dir.resolve())}
        commit = _git_commit()
        if commit:
            tags["git.commit"] = commit
        self.tracker = make_tracker(self.tracking, self.name, self.run_dir, self.resume_ids)
        for attempt in range(1, TRACKING_START_ATTEMPTS + 1):
            try:
                self.tracker.start(flatten_dict(self.config), tags,
                                   [{"algorithm": m.algorithm, **m.hp}
                                    for m in self.state.members])
                break
            except Exception as err:
                if attempt == TRACKING_START_ATTEMPTS:
                    log.warning("MLflow could not start (%s): tracking is off for this run", err)
                    self.tracker = NullTracker()
                else:  # a busy server may miss one request's timeout; start() resumes
                    log.warning("MLflow start, attempt %d failed (%s): retrying", attempt, err)
                    time.sleep(TRACKING_RETRY_S)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(
            str(yaml.safe_dump(self.config, sort_keys=False)))
        step = self.state.member_step()
        self.next_write = step + self.write_every if self.write_every else None
        self.next_ckpt = step + self.ckpt_every if self.ckpt_every else None
        every = self.tracking.video_every_generations if self.tracking.videos else 0
        self.next_video = (self.state.generation // every + 1) * every if every else None

    # ------------------------------------------------------------------ every turn
    def maybe_write(self) -> None:
        """Metrics every ``write_interval`` env steps per member, a checkpoint every
        ``checkpoint_interval``, a video every ``video_every_generations``."""
        step = self.state.member_step()
        if self.next_write is not None and step >= self.next_write:
            self.tracker.log_metrics(self.metrics(), step)
            self.next_write = step + self.write_every
        if self.next_ckpt is not None and step >= self.next_ckpt:
            self.checkpoint()
            self.next_ckpt = step + self.ckpt_every
        self.maybe_video()

    def metrics(self) -> dict[str, float]:
        """``population/...`` keys for the parent run, ``member/<i>/...`` for member ``i``'s,
        its hyperparameters (``hp/...``) at every write, so that every member has a curve of
        each whether or not it ever mutated."""
        state = self.state
        out: dict[str, float] = {
            "population/env_steps": state.total_env_steps,
            "population/env_steps_per_s": state.env_steps_per_s(),
            "population/generation": state.generation,
        }
        latest = [m.fitness[-1] for m in state.members if m.fitness]
        if latest:
            out["population/best_fitness"] = max(latest)
            out["population/mean_fitness"] = sum(latest) / len(latest)
        final = state.final
        if final is not None:
            out["population/final_score"] = final.final_score
            out["population/random_score"] = final.random_score
            out |= final_game_metrics(final.games or [])
        out |= self.generations.game.metrics()
        out |= self.time_metrics
        report = self.checkpoints.report
        out |= {"checkpoints/written": report.written, "checkpoints/failed": len(report.failed)}
        if self.storage is not None:
            out["checkpoints/stored"] = report.stored
        for i, m in enumerate(state.members):
            p = f"member/{i}/"
            if final is not None:
                out[p + "final_score"] = final.scores[i]
            out[p + "env_steps"] = m.env_steps
            out[p + "updates"] = m.updates
            out[p + "max_policy_lag_seen"] = m.max_lag_seen
            if m.train_seconds > 0:
                out[p + "updates_per_s"] = m.updates / m.train_seconds
            if m.fitness:
                out[p + "fitness"] = m.fitness[-1]
            score = m.mean_score()
            if score is not None:
                out[p + "episode_score"] = score
            out |= {p + k: v for k, v in m.metrics.items()}
            out |= {p + f"hp/{k}": float(v) for k, v in m.hp.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)}
        return out

    def checkpoint(self) -> Path:
        """Every member's full state, the run's state and the buffer, taken at this step and
        written in the background (:class:`~distmarl.runtime.records.checkpoints.CheckpointWriter`);
        the folder it goes to."""
        began = time.perf_counter()
        states = self.fleet.learner_states()  # a restarted learner is restored first
        buffer_state = self.fleet.buffer_state()
        meta = copy.deepcopy({"config": self.config, "agent_spaces": self.agent_spaces,
                              **self.state.state_dict(), **self.generations.state_dict(),
                              "mlflow": self.tracker.run_ids()})
        path = self.checkpoints.submit(Taken(
            self.state.total_env_steps, meta, states, buffer_state,
            self.generations.snapshot_weights(), self.state.best_fitness()))
        self.checkpoint_blocked_s += time.perf_counter() - began
        self.last_checkpoint = str(path)
        return path

    # ------------------------------------------------------------------ end
    def note_time(self, shares: Mapping[str, Mapping[str, float]]) -> None:
        """Where the run's time went (:func:`~distmarl.runtime.logic.time_spent.time_shares`):
        the parent run's last metrics carry it."""
        self.time_metrics = time_metrics(shares)

    def finish(self, status: str = "FINISHED") -> None:
        """End the run's records, then close the tracking runs with ``status`` (metrics never
        sent go to ``mlflow-unsent.jsonl``). ``FINISHED``: final metrics, checkpoint and
        artifacts (config, lineage, plots, the elite model); ``KILLED`` (a signal stopped the
        run): final metrics and checkpoint only, so the stop is quick and a resume goes on from
        here; ``FAILED``: nothing more."""
        try:
            if status != "FAILED" and self.state.members:
                self.tracker.log_metrics(self.metrics(), self.state.member_step())
                self.checkpoint()
                if not self.checkpoints.flush(FINAL_CHECKPOINT_S):
                    log.warning("the last checkpoint was not written within %.0f s",
                                FINAL_CHECKPOINT_S)
                if status == "FINISHED":
                    self.write_artifacts()
                self.tracker.flush()
                if status == "FINISHED":
                    self.log_elite_model()
        finally:
            self.tracker.finish(status, spill=self.run_dir / "mlflow-unsent.jsonl")

    def write_artifacts(self) -> None:
        from distmarl.tracking.plots import plot_family_tree

        out = self.run_dir
        lineage = self.generations.lineage.to_json()
        lineage_path = out / "lineage.json"
        lineage_path.write_text(json.dumps(lineage, indent=1))
        fitness, *more = self.generations.game.plots(out, self.state.fitness_history)
        files = [out / "config.yaml", lineage_path, fitness,
                 plot_family_tree(lineage, out / "family_tree.png"), *more]
        for f in files:
            self.tracker.log_artifact(f)
        for artifact_file, columns in self.generations.game.tables().items():
            self.tracker.log_table(columns, artifact_file)
        if self.last_checkpoint:
            for f in sorted(Path(self.last_checkpoint).iterdir()):
                if not is_buffer_file(f.name) or self.tracking.log_buffer:
                    self.tracker.log_artifact(f, "checkpoint")

    def log_elite_model(self) -> str | None:
        """The elite (the final evaluation's, else the best by latest fitness) as a model of
        the parent run, acting with the weights it last published (those the final
        evaluation scored); its URI, or None when tracking is off or the model could not be
        logged."""
        if self.tracker.run_ids().get("parent") is None:
            return None
        from distmarl.tracking.policy_model import PolicyModel

        elite = self._elite()
        try:
            model = PolicyModel(self.policies(elite))
        except Exception as err:
            log.warning("could not log the elite model to MLflow: %s", err)
            return None
        self.elite_model_uri = self.tracker.log_model(
            model, "elite_policy", [f"distmarl=={__version__}", "numpy",
                                    f"torch=={_torch_version()}"],
            {"distmarl.elite_member": str(elite)})
        if self.tracking.videos:
            self.videos.record_all(self.generations.game.videos(elite, self._latest()))
        return self.elite_model_uri

    def maybe_video(self) -> None:
        """The current elite's ``elite`` video, as ``generation_<g>``, once every
        ``video_every_generations`` generations of a tracked run."""
        generation = self.state.generation
        if self.next_video is None or generation < self.next_video:
            return
        every = self.tracking.video_every_generations
        self.next_video = (generation // every + 1) * every
        if self.tracker.run_ids().get("parent") is None:
            return
        seats = self.generations.game.videos(self._elite(), self._latest())["elite"]
        self.videos.record(f"generation_{generation}", seats)

    def _latest(self) -> list[float]:
        """Each member's latest fitness (-inf before its first evaluation)."""
        return [m.fitness[-1] if m.fitness else float("-inf") for m in self.state.members]

    def _elite(self) -> int:
        if self.state.final is not None:
            return self.state.final.elite
        latest = self._latest()
        return max(range(len(latest)), key=lambda i: latest[i])

    def summary(self) -> dict[str, Any]:
        report = self.checkpoints.report
        return {"run_dir": str(self.run_dir), "mlflow": self.tracker.run_ids(),
                "tracking": self.tracker.status(), "checkpoint": self.last_checkpoint,
                "elite_model_uri": self.elite_model_uri, "resumed_from": self.resumed_from,
                "storage": None if self.storage is None else self.storage.uri,
                "checkpoints": {**asdict(report), "blocked_s": self.checkpoint_blocked_s}}


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
