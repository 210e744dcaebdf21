"""MlflowTracker.start after a failed request: called again, it goes on where it stopped (no
duplicate runs, every run's params logged once), on a real MLflow sqlite store, whether the
failed request was lost or was carried out and only its reply lost (a busy server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.tracking.mlflow import MlflowTracker


@pytest.mark.parametrize("done", [False, True], ids=["lost", "done"])
@pytest.mark.parametrize("fail_call", [1, 2, 3])  # the parent's, then the members' request
@pytest.mark.parametrize("method", ["create_run", "log_batch"])
def test_start_resumes_after_a_failed_request(tmp_path: Path, method: str, fail_call: int,
                                              done: bool) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", "run", artifact_dir=tmp_path / "art")
    real, calls = getattr(tracker.client, method), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_call:
            if done:
                real(*args, **kwargs)
            raise TimeoutError("read timed out")
        return real(*args, **kwargs)

    setattr(tracker.client, method, flaky)
    params, members = {"population.size": 2}, [{"lr": 0.1}, {"lr": 0.2}]
    with pytest.raises(TimeoutError):
        tracker.start(params, {"algorithm": "MADDPG"}, members)
    ids = tracker.start(params, {"algorithm": "MADDPG"}, members)
    tracker.finish()
    client = tracker.client
    runs = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    assert len(runs) == 3  # no run twice, though a create was done and its reply lost
    # one failed call, then three runs / param batches; a run made by the failed call is
    # found, not made again
    assert len(calls) == (3 if done and method == "create_run" else 4)
    assert client.get_run(ids["parent"]).data.params == {"population.size": "2"}
    for run_id, hp in zip(ids["members"], members, strict=True):
        run = client.get_run(run_id)
        assert run.data.params == {"lr": str(hp["lr"])}
        assert run.data.tags["mlflow.parentRunId"] == ids["parent"]


def test_finish_asks_again_when_closing_a_run_times_out(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", "run", artifact_dir=tmp_path / "art")
    ids = tracker.start({"population.size": 2}, {"algorithm": "MADDPG"}, [{}, {}])
    real, calls = tracker.client.set_terminated, []

    def busy_once(run_id: str, status: str) -> None:
        calls.append(run_id)
        if len(calls) == 2:  # the second run's first request: a busy server's timeout
            raise TimeoutError("read timed out")
        real(run_id, status=status)

    tracker.client.set_terminated = busy_once  # type: ignore[method-assign]
    tracker.finish()
    client = tracker.client
    assert [client.get_run(i).info.status for i in [*ids["members"], ids["parent"]]] == [
        "FINISHED"] * 3
    assert len(calls) == 4 and calls[1] == calls[2]  # asked again, then went on
    assert tracker.failures == 0


def test_finish_gives_up_on_a_run_the_server_never_closes(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", "run", artifact_dir=tmp_path / "art")
    ids = tracker.start({"population.size": 1}, {"algorithm": "MADDPG"}, [{}])
    real = tracker.client.set_terminated

    def never_for_parent(run_id: str, status: str) -> None:
        if run_id == ids["parent"]:
            raise TimeoutError("read timed out")
        real(run_id, status=status)

    tracker.client.set_terminated = never_for_parent  # type: ignore[method-assign]
    tracker.finish(timeout_s=1.0)
    client = tracker.client
    assert client.get_run(ids["members"][0]).info.status == "FINISHED"
    assert client.get_run(ids["parent"]).info.status == "RUNNING"
    assert tracker.failures == 1 and "read timed out" in tracker.last_error
