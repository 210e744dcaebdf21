"""``distmarl sweep``: grid points x seeds trained in process, one after another; stopped by
SIGTERM (exit 143) and resumed by the same command, which skips the finished runs, resumes the
interrupted one and ends with the report; bad arguments refused before anything runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distmarl.config import ConfigError
from distmarl.studies.sweep import SweepPlan, claim, parse_seeds

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
SHORT = ["tracking.mlflow=false", "tracking.videos=false", "training.max_steps_per_member=300",
         "evolution.evo_steps=100", "evolution.final_episodes=2",
         "tracking.checkpoint_interval=50"]


def sweep(out: Path) -> subprocess.Popen:
    sets = [a for s in SHORT for a in ("--set", s)]
    return subprocess.Popen([sys.executable, "-m", "distmarl", "sweep", str(TINY),
                             "--seeds", "0-1", "--grid", "replay.replay_ratio=0.25,0.75",
                             *sets, "--out", str(out), "--local", "--quiet"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_sweep_stopped_by_sigterm_resumes_where_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    first_run = out / "replay.replay_ratio=0.25" / "seed-0"
    second_run = out / "replay.replay_ratio=0.25" / "seed-1"
    proc = sweep(out)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not list(second_run.glob("checkpoints/step-*")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "the same command resumes it" in err
    finished = (first_run / "summary.json").stat().st_mtime
    assert json.loads((second_run / "summary.json").read_text())["stop_reason"] \
        == "stopped by SIGTERM"

    again = sweep(out)
    stdout, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert (first_run / "summary.json").stat().st_mtime == finished  # not run again
    resumed = json.loads((second_run / "summary.json").read_text())
    assert resumed["stop_reason"] == "max_steps" and resumed["resumed_from"]
    assert json.loads((second_run / "study.json").read_text())["arm"] \
        == "replay.replay_ratio=0.25"
    assert "| replay.replay_ratio=0.25 | 2 | 0, 1 |" in stdout
    assert "| replay.replay_ratio=0.75 | 2 | 0, 1 |" in stdout
    assert "distmarl: 4 runs in" in stdout
    assert (out / "report" / "curves.png").exists()


def test_bad_sweep_arguments_are_refused_before_anything_runs(tmp_path: Path) -> None:
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    for bad in ("0-x", "3,3", ""):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    with pytest.raises(ConfigError, match=r"--grid point training\.no_such_key=1"):
        SweepPlan.parse(TINY, "0", ["training.no_such_key=1,2"], [])
    with pytest.raises(ConfigError, match="--grid"):
        SweepPlan.parse(TINY, "0", ["replay.replay_ratio"], [])
    plan = SweepPlan.parse(TINY, "0-1", ["replay.replay_ratio=0.25,0.75"], [])
    assert [arm for arm, _ in plan.points()] == ["replay.replay_ratio=0.25",
                                                 "replay.replay_ratio=0.75"]
    claim(tmp_path / "a", plan)
    claim(tmp_path / "a", plan)  # the same sweep: resumed
    other = SweepPlan.parse(TINY, "0-2", [], [])
    with pytest.raises(ConfigError, match="holds another sweep's runs"):
        claim(tmp_path / "a", other)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty and holds no sweep"):
        claim(tmp_path / "b", plan)
