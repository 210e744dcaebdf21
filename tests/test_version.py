"""``distmarl.__version__`` is the version in ``pyproject.toml``."""

from __future__ import annotations

import re
from pathlib import Path

import distmarl
from distmarl.version import __version__

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_package_version_is_pyprojects() -> None:
    declared = re.search(r'^version = "(.+)"$', PYPROJECT.read_text(), re.M)
    assert declared is not None
    assert __version__ == declared.group(1) == distmarl.__version__
