"""The core stays free of Ray and MLflow; only distmarl.runtime imports ray."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "distmarl"
CORE = ["buffers", "envs", "networks", "algorithms", "hpo", "types.py", "agents.py", "config",
        "collect", "checkpoint.py"]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def core_files() -> list[Path]:
    files: list[Path] = []
    for entry in CORE:
        target = PACKAGE / entry
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target] if target.exists() else [])
    return files


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_neither_ray_nor_mlflow(path: Path) -> None:
    assert not imported_modules(path) & {"ray", "mlflow"}, path


def test_only_runtime_and_cli_import_ray() -> None:
    offenders = [
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
        if "ray" in imported_modules(p) and p.relative_to(PACKAGE).parts[0] not in {"runtime", "cli.py"}
    ]
    assert offenders == []


def test_core_files_were_found() -> None:
    assert any(p.parent.name == "buffers" for p in core_files())
