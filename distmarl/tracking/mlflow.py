"""MLflow tracking: one parent run per training run, one nested child run per member.

Metrics are queued and written in batches (``log_batch``) by a background thread, so a slow or
unreachable tracking server never stalls training: failed writes stay queued and are retried,
a warning says so once, and the queue is bounded (the oldest metrics go first, counted).
Only the coordinator process holds a tracker; actors never call the backend.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distmarl.tracking.base import NullTracker, Tracker, split_key
from distmarl.tracking.blank_store import start_from_blank

if TYPE_CHECKING:
    from distmarl.config import TrackingConfig

log = logging.getLogger(__name__)

#: seconds :meth:`MlflowTracker.finish` keeps retrying the last metrics, and again closing
#: the runs, before it spills them and gives up on a server that does not answer
FINISH_TIMEOUT_S = 10.0

#: A tracking server that does not answer must not hold training: no retries inside MLflow's
#: HTTP client (we retry ourselves) and a short timeout. Set before mlflow is imported.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")

#: the tag holding a run's creation key (see :meth:`MlflowTracker._create_run`)
CREATE_KEY_TAG = "distmarl.create_key"

MAX_PARAM_LEN = 6000
MAX_QUEUE = 200_000
BATCH = 1000


def resolve_tracking_uri(run_dir: Path, uri: str | None = None) -> str:
    """``uri``, else ``$MLFLOW_TRACKING_URI``, else a SQLite store inside ``run_dir``."""
    if uri:
        return uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    run_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"


def is_local_store(uri: str) -> bool:
    return uri.startswith(("sqlite:", "file:")) or "://" not in uri


def make_tracker(tracking: TrackingConfig, name: str, run_dir: Path,
                 resume: dict[str, Any] | None = None) -> Tracker:
    """MLflow tracking into experiment ``tracking.experiment_name`` (default: ``name``, the
    config's), a parent run named as the run directory (``resume``: an earlier tracker's
    ``run_ids()``, whose runs go on); a no-op tracker when tracking is off."""
    if not tracking.mlflow:
        return NullTracker()
    uri = resolve_tracking_uri(run_dir, tracking.mlflow_uri)
    return MlflowTracker(uri, tracking.experiment_name or name, run_dir.name,
                         artifact_dir=run_dir / "mlartifacts", resume=resume,
                         parent_run=tracking.parent_run)


class MlflowTracker:
    """Writes a run's params, metrics and artifacts to MLflow without ever raising into training.

    :param uri: tracking URI (see :func:`resolve_tracking_uri`).
    :param experiment_name: experiment to log into (created when missing).
    :param run_name: the parent run's name.
    :param artifact_dir: where a local store keeps artifacts (None: MLflow's default).
    :param resume: ``run_ids()`` of an earlier tracker: the same parent and child runs continue.
    :param flush_interval_s: seconds between background flushes.
    :param parent_run: a run id the parent run is nested under (a sweep's run), or None.
    """

    def __init__(self, uri: str, experiment_name: str, run_name: str,
                 artifact_dir: Path | None = None, resume: Mapping[str, Any] | None = None,
                 flush_interval_s: float = 2.0, parent_run: str | None = None) -> None:
        from mlflow.tracking import MlflowClient

        self.uri = uri
        start_from_blank(uri)  # a new SQLite store in a moment, not after MLflow's migrations
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.parent_run = parent_run
        self.artifact_dir = artifact_dir
        self.resume = dict(resume or {})
        self.parent_id: str | None = self.resume.get("parent")
        self.member_ids: list[str] = list(self.resume.get("members", []))
        #: runs whose params are logged (a resumed run's were, by the earlier tracker)
        self._params_logged: set[str] = {r for r in (self.parent_id, *self.member_ids) if r}
        #: calls of :meth:`start` so far, and the creation key of each run it creates, by name
        self._start_attempts = 0
        self._create_keys: dict[str, str] = {}
        self._metrics: deque[tuple[str, str, float, int, int]] = deque()
        self._artifacts: deque[tuple[str, str, str | None]] = deque()
        self._tables: deque[tuple[str, dict[str, list[Any]], str]] = deque()
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._warned = False
        self.dropped = 0
        self.failures = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._interval = flush_interval_s
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ runs
    def start(self, params: Mapping[str, Any], tags: Mapping[str, str],
              member_params: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Create (or, resuming, reopen) the parent run and one child run per member. After a
        failure (a request timed out) calling it again goes on from where it stopped."""
        self._start_attempts += 1
        exp_id = self._experiment_id()
        if self.parent_id is None:
            nested = {} if self.parent_run is None else {"mlflow.parentRunId": self.parent_run}
            self.parent_id = self._create_run(exp_id, self.run_name,
                                              {**{k: str(v) for k, v in tags.items()}, **nested})
        else:
            self.client.update_run(self.parent_id, status="RUNNING")
        self._log_params_once(self.parent_id, params)
        for member, hp in enumerate(member_params):
            if member < len(self.member_ids):
                self.client.update_run(self.member_ids[member], status="RUNNING")
            else:
                self.member_ids.append(self._create_run(
                    exp_id, f"member-{member}",
                    {"mlflow.parentRunId": self.parent_id, "distmarl.member": str(member)}))
            self._log_params_once(self.member_ids[member], hp)
        self._thread = threading.Thread(target=self._loop, name="mlflow-flush", daemon=True)
        self._thread.start()
        return self.run_ids()

    def _create_run(self, exp_id: str, name: str, tags: Mapping[str, str]) -> str:
        """A new run's id, or, when an earlier :meth:`start` failed, the run that its create
        request made although its reply never came (a busy server may finish a request
        after the client's timeout): each run carries a key of its own (tag
        :data:`CREATE_KEY_TAG`), kept across attempts, and is looked up by it before it is
        created again."""
        key = self._create_keys.setdefault(name, uuid.uuid4().hex)
        if self._start_attempts > 1:
            found = self.client.search_runs(
                [exp_id], filter_string=f"tags.`{CREATE_KEY_TAG}` = '{key}'", max_results=1)
            if found:
                return str(found[0].info.run_id)
        run = self.client.create_run(exp_id, run_name=name, tags={**tags, CREATE_KEY_TAG: key})
        return str(run.info.run_id)

    def run_ids(self) -> dict[str, Any]:
        return {"uri": self.uri, "experiment": self.experiment_name, "parent": self.parent_id,
                "members": list(self.member_ids)}

    def _experiment_id(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment_name)
        if exp is not None:
            return exp.experiment_id
        location = None
        if self.artifact_dir is not None and is_local_store(self.uri):
            self.artifact_dir.mkdir(parents=True, exist_ok=True)
            location = self.artifact_dir.resolve().as_uri()
        return self.client.create_experiment(self.experiment_name, artifact_location=location)

    def _log_params_once(self, run_id: str, params: Mapping[str, Any]) -> None:
        if run_id not in self._params_logged:
            self._log_params(run_id, params)
            self._params_logged.add(run_id)

    def _log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(str(k), str(v)[:MAX_PARAM_LEN]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i : i + 100])

    # ------------------------------------------------------------------ metrics
    def run_for(self, member: int | None) -> str:
        assert self.parent_id is not None, "start() first"
        return self.parent_id if member is None else self.member_ids[member]

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Queue metrics; ``member/<i>/...`` keys go to member ``i``'s run."""
        now = int(time.time() * 1000)
        with self._lock:
            for key, value in metrics.items():
                member, name = split_key(key)
                self._metrics.append((self.run_for(member), name, float(value), now, int(step)))
            overflow = len(self._metrics) - MAX_QUEUE
            for _ in range(max(0, overflow)):
                self._metrics.popleft()
                self.dropped += 1

    def log_artifact(self, path: Path, artifact_path: str | None = None,
                     member: int | None = None) -> None:
        with self._lock:
            self._artifacts.append((self.run_for(member), str(path), artifact_path))

    def log_table(self, columns: Mapping[str, list[Any]], artifact_file: str) -> None:
        with self._lock:
            self._tables.append((self.run_for(None), {k: list(v) for k, v in columns.items()},
                                 artifact_file))

    def flush(self) -> bool:
        """Write everything queued; True when the queue is empty afterwards. One flush at a
        time (the background thread and an explicit call may race)."""
        with self._flush_lock:
            return self._flush()

    def _flush(self) -> bool:
        from mlflow.entities import Metric

        while True:
            with self._lock:
                batch = [self._metrics.popleft() for _ in range(min(BATCH, len(self._metrics)))]
            if not batch:
                break
            by_run: dict[str, list[Metric]] = {}
            for run_id, key, value, ts, step in batch:
                by_run.setdefault(run_id, []).append(Metric(key, value, ts, step))
            try:
                for run_id, items in by_run.items():
                    self.client.log_batch(run_id, metrics=items)
            except Exception as err:
                with self._lock:
                    self._metrics.extendleft(reversed(batch))
                self._failed(err)
                return False
        return (self._drain(self._artifacts, self._send_artifact)
                and self._drain(self._tables, lambda t: self.client.log_table(*t)))

    def _drain(self, queue: deque[Any], send: Callable[[Any], None]) -> bool:
        """``send`` each item of ``queue`` in order, removing it once sent; False at the first
        failure (it and the rest stay queued for the next flush)."""
        while True:
            with self._lock:
                if not queue:
                    return True
                item = queue[0]
            try:
                send(item)
            except Exception as err:
                self._failed(err)
                return False
            with self._lock:
                queue.popleft()

    def _send_artifact(self, item: tuple[str, str, str | None]) -> None:
        run_id, path, artifact_path = item
        if Path(path).is_dir():
            self.client.log_artifacts(run_id, path, artifact_path)
        else:
            self.client.log_artifact(run_id, path, artifact_path)

    def log_model(self, model: Any, name: str, pip_requirements: list[str],
                  tags: Mapping[str, str]) -> str | None:
        """``mlflow.pytorch.log_model`` of ``model`` on the parent run, with ``tags`` set on
        it; the model's URI. Best effort: a failure is logged, not raised."""
        if self.parent_id is None:
            return None
        try:
            import mlflow

            with (_tracking_uri(self.uri), _without(PICKLE_NOTICE, "mlflow.pytorch"),
                  mlflow.start_run(run_id=self.parent_id)):
                # "pickle": the policy acts through numpy, which pt2's graph tracing cannot
                # follow. Load it only from a tracking server you trust; checkpoints are the
                # safe path.
                info = mlflow.pytorch.log_model(model, name=name, serialization_format="pickle",
                                                pip_requirements=pip_requirements)
                for key, value in tags.items():
                    mlflow.set_tag(key, value)
            return str(info.model_uri)
        except Exception as err:
            log.warning("could not log the model %s to MLflow: %s", name, err)
            return None

    def _failed(self, err: Exception) -> None:
        self.failures += 1
        self.last_error = f"{type(err).__name__}: {err}"[:300]
        if not self._warned:
            self._warned = True
            log.warning("MLflow at %s is not answering (%s); training goes on, metrics are kept "
                        "and retried", self.uri, self.last_error)

    def spill(self, path: Path) -> int:
        """Write the queued metrics as JSON lines (run_id, key, value, timestamp, step)."""
        import json

        with self._lock:
            rows = list(self._metrics)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            for run_id, key, value, ts, step in rows:
                f.write(json.dumps({"run_id": run_id, "key": key, "value": value,
                                    "timestamp": ts, "step": step}) + "\n")
        log.warning("MLflow still unreachable: %d metrics written to %s", len(rows), path)
        return len(rows)

    def status(self) -> dict[str, Any]:
        return {"failures": self.failures, "pending": self.pending(), "dropped": self.dropped,
                "last_error": self.last_error}

    def pending(self) -> int:
        with self._lock:
            return len(self._metrics) + len(self._artifacts) + len(self._tables)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def finish(self, status: str = "FINISHED", spill: Path | None = None,
               timeout_s: float | None = None) -> None:
        """Stop the background thread, flush (retrying until ``timeout_s``, default
        :data:`FINISH_TIMEOUT_S`), close the runs (as long again). Metrics still unwritten
        then go to ``spill`` (JSON lines) so that none is lost."""
        timeout_s = FINISH_TIMEOUT_S if timeout_s is None else timeout_s
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._interval + 10)
        deadline = time.monotonic() + timeout_s
        while not self.flush() and time.monotonic() < deadline:
            time.sleep(0.5)
        if spill is not None and self.pending():
            self.spill(spill)
        deadline = time.monotonic() + timeout_s
        for run_id in [*self.member_ids, self.parent_id]:
            if run_id is not None:
                self._terminate(run_id, status, deadline)

    def _terminate(self, run_id: str, status: str, deadline: float) -> None:
        """Close run ``run_id`` with ``status``, asking again until ``deadline`` (monotonic
        seconds): a busy server that misses one request's short timeout would otherwise
        leave the run RUNNING for good."""
        while True:
            try:
                self.client.set_terminated(run_id, status=status)
                return
            except Exception as err:
                if time.monotonic() >= deadline:
                    self._failed(err)
                    return
                time.sleep(0.5)


#: MLflow's notice on every pickled model: that a pickle runs code when loaded, which the
#: README says where it shows how to load the elite (a user has nothing to do about it)
PICKLE_NOTICE = "Saving pytorch model by Pickle or CloudPickle format"


@contextlib.contextmanager
def _without(notice: str, logger: str) -> Iterator[None]:
    """``logger``'s records that start with ``notice`` dropped within the block."""
    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(notice)

    target = logging.getLogger(logger)
    target.addFilter(keep)
    try:
        yield
    finally:
        target.removeFilter(keep)


@contextlib.contextmanager
def _tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's process-wide tracking URI (and ``$MLFLOW_TRACKING_URI``, which setting it
    writes) is ``uri`` within the block and what it was after it, so a later run in the same
    process (an in-process run, a notebook) does not log into this run's store."""
    import mlflow
    from mlflow.tracking._tracking_service.utils import is_tracking_uri_set

    before = mlflow.get_tracking_uri() if is_tracking_uri_set() else None
    env = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)  # type: ignore[arg-type]
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env
