"""The tracker interface and its no-op, plus the metric-key conventions.

Metric keys are namespaced: ``member/3/loss/critic`` belongs to member 3's child run (logged
there as ``loss/critic``); ``population/best_fitness`` and ``perf/...`` belong to the parent run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


def split_key(key: str) -> tuple[int | None, str]:
    """``member/3/loss/critic`` -> ``(3, "loss/critic")``; other keys -> ``(None, key)``."""
    if key.startswith("member/"):
        _, member, rest = key.split("/", 2)
        return int(member), rest
    return None, key


class Tracker(Protocol):
    """What the coordinator calls; implementations must never stop training by raising."""

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str],
              member_params: list[Mapping[str, Any]]) -> dict[str, Any]: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...

    def log_artifact(self, path: Path, artifact_path: str | None = None,
                     member: int | None = None) -> None: ...

    def log_table(self, columns: Mapping[str, list[Any]], artifact_file: str) -> None:
        """Log a table (column name -> values, every column as long) to the parent run as
        an MLflow table (a JSON artifact ``artifact_file`` the UI shows as a table)."""
        ...

    def log_model(self, model: Any, name: str, pip_requirements: list[str],
                  tags: Mapping[str, str]) -> str | None:
        """Log ``model`` (a ``torch.nn.Module``) to the parent run; its URI, or None."""
        ...

    def flush(self) -> bool: ...

    def finish(self, status: str = "FINISHED", spill: Path | None = None) -> None:
        """Close the runs; metrics still unsent go to ``spill`` (JSON lines) when given."""
        ...

    def run_ids(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...


class NullTracker:
    """Tracking switched off (``--no-mlflow``): accepts everything, stores nothing."""

    def start(self, params: Mapping[str, Any], tags: Mapping[str, str],
              member_params: list[Mapping[str, Any]]) -> dict[str, Any]:
        return {}

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def log_artifact(self, path: Path, artifact_path: str | None = None,
                     member: int | None = None) -> None:
        pass

    def log_table(self, columns: Mapping[str, list[Any]], artifact_file: str) -> None:
        pass

    def log_model(self, model: Any, name: str, pip_requirements: list[str],
                  tags: Mapping[str, str]) -> str | None:
        return None

    def flush(self) -> bool:
        return True

    def finish(self, status: str = "FINISHED", spill: Path | None = None) -> None:
        pass

    def run_ids(self) -> dict[str, Any]:
        return {}

    def status(self) -> dict[str, Any]:
        return {}
