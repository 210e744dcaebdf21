"""A new SQLite MLflow store made as a copy of a blank one, not by MLflow's schema migrations.

MLflow builds a new SQLite store by running every schema migration since its first release,
which takes seconds, at the start of every run that tracks into a store of its own. Instead,
the first store a given MLflow version builds on this machine is kept as a blank (its
tables and schema version, without the default experiment) in the user's cache directory
(``$XDG_CACHE_HOME/distmarl``, else ``~/.cache/distmarl``), and each new store starts as a
copy of it. Opening the copy, MLflow checks its schema version, as it does for any store, and
adds the default experiment with the new store's own artifact location, as it does for a store
it has just built. Where the blank cannot be made or copied (a read-only home), MLflow builds
the store itself, as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
from pathlib import Path

__all__ = ["blank_path", "start_from_blank"]

log = logging.getLogger(__name__)

SQLITE = "sqlite:///"


def blank_path() -> Path:
    """Where this MLflow version's blank store is kept (one file per version)."""
    import mlflow

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "distmarl" / f"mlflow-{mlflow.__version__}-blank.db"


def start_from_blank(uri: str) -> bool:
    """Copy the blank store to ``uri``'s file when ``uri`` is a SQLite store that does not
    exist yet (the blank is built first when there is none). True when the store was copied;
    False when there was nothing to do or the copy could not be made (MLflow then builds the
    store when it is first opened)."""
    if not uri.startswith(SQLITE):
        return False
    path = Path(uri.removeprefix(SQLITE).split("?", 1)[0])
    if not path.name or path.exists():
        return False
    try:
        blank = blank_path()
        if not blank.exists():
            _build_blank(blank)
        path.parent.mkdir(parents=True, exist_ok=True)
        _copy_atomically(blank, path)
    except (OSError, sqlite3.Error) as err:
        log.debug("mlflow: no blank store (%s); MLflow builds %s itself", err, path)
        return False
    return True


def _build_blank(blank: Path) -> None:
    """Let MLflow build a store beside ``blank``, drop its default experiment (whose artifact
    location is that store's own), and move it into place: concurrent builders each move a
    whole file."""
    from mlflow.tracking import MlflowClient

    blank.parent.mkdir(parents=True, exist_ok=True)
    building = blank.with_name(f"{blank.name}.{os.getpid()}.building")
    with contextlib.suppress(FileNotFoundError):
        building.unlink()
    MlflowClient(tracking_uri=f"{SQLITE}{building}").search_experiments(max_results=1)
    with contextlib.closing(sqlite3.connect(building)) as db, db:
        db.execute("DELETE FROM experiment_tags WHERE experiment_id = 0")
        db.execute("DELETE FROM experiments WHERE experiment_id = 0")
    os.replace(building, blank)


def _copy_atomically(source: Path, target: Path) -> None:
    """``target`` appears whole or not at all, and never replaces a file that appeared
    meanwhile (another run's store at the same URI: linking fails then, and that store is
    kept)."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        shutil.copyfile(source, partial)
        with contextlib.suppress(FileExistsError):
            os.link(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
