"""The tests leave the user's home directory alone: a local Ray's token lands in the empty home
the test run gives itself (``tests/conftest.py``), not in the user's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import TEST_HOME, USER_HOME


def test_the_tests_run_in_a_home_of_their_own() -> None:
    assert os.environ["HOME"] == TEST_HOME != USER_HOME
    assert Path.home() == Path(TEST_HOME)
    assert Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(TEST_HOME)  # MLflow's blank store


@pytest.mark.ray
def test_a_local_ray_writes_its_token_in_the_tests_home(ray_local) -> None:
    token = Path(TEST_HOME) / ".ray" / "auth_token"
    assert token.is_file() and token.read_text().strip()
