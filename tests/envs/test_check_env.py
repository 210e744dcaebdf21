"""``distmarl check-env`` on the docs' worked example (it passes, says what fits) and on a
broken env (it names the failure and exits 1); the worked example trains in process, its
module imported from PYTHONPATH as the docs say (on Ray, its env trains in
``tests/runtime/test_signals.py``'s Ray run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.cli import main
from distmarl.collect.env_check import check_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "your_env"


@pytest.fixture
def example_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))


class OffSpaceEnv:
    """The worked example's env whose observations leave their space (a bug the API test
    catches)."""

    def __new__(cls, **kwargs):
        sys.path.insert(0, str(EXAMPLE))
        from chase_env import ChaseEnv

        env = ChaseEnv(**kwargs)
        env.observation_space = lambda agent: spaces.Box(-1.0, 1.0, (2,), np.float32)
        return env


def test_the_worked_example_passes_and_every_algorithm_fits(example_importable, capsys) -> None:
    result = check_env("chase_env:parallel_env", {"max_steps": 10})
    assert result.passed and all(r is None for r in result.algorithms.values())
    text = result.text()
    assert "parallel_api_test passed" in text and "state(): shape (3,)" in text
    assert "render modes: rgb_array" in text and "league: not needed" in text
    assert main(["check-env", "chase_env:parallel_env", "--set", "max_steps=10"]) == 0
    assert "algorithms that fit: MADDPG, MATD3, IPPO, MAPPO" in capsys.readouterr().out


def test_a_broken_env_fails_naming_the_check(capsys) -> None:
    code = main(["check-env", f"{__name__}:OffSpaceEnv"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL PettingZoo's parallel_api_test" in out
    assert main(["check-env", "chase_env:parallel_env", "--set", "max_steps"]) == 2
    assert "--set 'max_steps': write KEY=VALUE" in capsys.readouterr().err


def test_a_competitive_game_is_told_its_league_setting() -> None:
    text = check_env("pettingzoo.classic:connect_four_v3", {}).text()
    assert "league: looks competitive" in text and "league: {symmetric: true}" in text


def test_the_worked_example_trains_in_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "distmarl", "train", str(EXAMPLE / "chase_mappo.yaml"), "--local",
         "--no-mlflow", "--quiet", "--set", f"tracking.directory={tmp_path}",
         "--set", "training.max_steps_per_member=512", "--set", "evolution.evo_steps=256",
         "--set", "evolution.final_episodes=2"],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "final score" in done.stderr + done.stdout
