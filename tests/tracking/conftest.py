"""One real ``mlflow server`` and one tiny run tracked by it, shared by the tests that read that
run through the server: its records and elite model (``test_mlflow_run.py``) and its artifact
page in a browser (``test_mlflow_ui.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.tracking.test_mlflow_run import run_tiny, start_mlflow_server, stop_server


@pytest.fixture(scope="session")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server's URI and the summary of ``tiny.yaml`` trained in process (400 env steps per
    member, experiment ``tiny-exp``) with the server as its tracking store; the server is
    stopped at the end of the test run."""
    tmp = tmp_path_factory.mktemp("mlflow-server")
    proc, uri = start_mlflow_server(tmp)
    try:
        yield uri, run_tiny(tmp, [f"tracking.mlflow_uri={uri}"])
    finally:
        stop_server(proc)
