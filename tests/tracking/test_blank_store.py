"""A new SQLite store starts as a copy of a blank one: MLflow opens it as a store it built
itself; a store already there is never replaced; without a usable cache it is left to MLflow."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from distmarl.tracking.blank_store import blank_path, start_from_blank


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tests' own cache (``tests/conftest.py``), whose blank other tests share."""
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is relative to it
    return Path(os.environ["XDG_CACHE_HOME"])


def experiments(uri: str) -> list[tuple[str, str, str]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    client.create_run(client.create_experiment("exp"))
    return sorted((e.experiment_id, e.name, e.artifact_location)
                  for e in client.search_experiments())


def test_a_copied_store_answers_as_a_store_mlflow_built(cache: Path, tmp_path: Path) -> None:
    built = f"sqlite:///{tmp_path / 'built' / 'mlflow.db'}"
    (tmp_path / "built").mkdir()
    want = experiments(built)
    copied = f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}"
    assert start_from_blank(copied)
    assert blank_path().is_relative_to(cache) and blank_path().is_file()
    assert experiments(copied) == want  # the default experiment with this store's location
    with sqlite3.connect(blank_path()) as db:  # the blank holds no experiment
        assert db.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)


def test_a_store_already_there_is_kept(cache: Path, tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert start_from_blank(uri)
    kept = experiments(uri)
    assert not start_from_blank(uri)
    from mlflow.tracking import MlflowClient

    assert len(MlflowClient(tracking_uri=uri).search_runs([kept[-1][0]])) == 1


def test_without_a_cache_the_store_is_left_to_mlflow(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_dir))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert not start_from_blank(uri)
    assert not (tmp_path / "mlflow.db").exists()  # left to MLflow, which builds it on opening


def test_only_new_sqlite_files_are_touched(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert not start_from_blank("http://127.0.0.1:5000")
    assert not start_from_blank("file:///tmp/mlruns")
    assert not blank_path().exists()
