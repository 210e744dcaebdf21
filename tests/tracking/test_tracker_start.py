"""MlflowTracker.start after a failed request: called again, it goes on where it stopped (no
duplicate runs, every run's params logged once), on a real MLflow sqlite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.tracking.mlflow import MlflowTracker


@pytest.mark.parametrize("fail_call", [1, 2, 3])  # the parent's, then the members' request
@pytest.mark.parametrize("method", ["create_run", "log_batch"])
def test_start_resumes_after_a_failed_request(tmp_path: Path, method: str, fail_call: int
                                              ) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "exp", "run", artifact_dir=tmp_path / "art")
    real, calls = getattr(tracker.client, method), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_call:
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
    assert len(runs) == 3 and len(calls) == 4  # one failed call, three runs / param batches
    assert client.get_run(ids["parent"]).data.params == {"population.size": "2"}
    for run_id, hp in zip(ids["members"], members, strict=True):
        run = client.get_run(run_id)
        assert run.data.params == {"lr": str(hp["lr"])}
        assert run.data.tags["mlflow.parentRunId"] == ids["parent"]
