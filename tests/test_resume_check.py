"""``--resume RUN_DIR`` with a config that does not fit the checkpoint fails before Ray starts,
naming each mismatch: member count, a member's algorithm, the env's agents and spaces, a league
the checkpoint lacks. The checkpoints here are real ones (``save_checkpoint``), their metadata
as a run writes it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from distmarl.checkpoint import agent_spaces, save_checkpoint
from distmarl.config import ConfigError, load_config
from distmarl.factory import preflight
from distmarl.runtime.driver.resume import check_resume

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
TICTACTOE = ROOT / "examples" / "configs" / "tictactoe_ippo_league.yaml"


def saved_run(run_dir: Path, members: int = 2, algorithm: str = "MADDPG",
              spaces: dict[str, dict[str, str]] | None = None, league: bool = False
              ) -> Callable[[], Any]:
    """A run directory holding one checkpoint of ``members`` members of ``algorithm`` (the
    metadata a run records: config, members, agent spaces, a league's state); returns a
    function of the checkpoint's bytes (a failed resume must leave them as they are)."""
    meta: dict[str, Any] = {"config": {"env": {"spec": "mpe2:simple_speaker_listener_v4"}},
                            "members": [{"member": i, "algorithm": algorithm}
                                        for i in range(members)]}
    if spaces is not None:
        meta["agent_spaces"] = spaces
    if league:
        meta["league"] = {"league": {}, "rng": {}}
    states = [{"algo": {"w": torch.zeros(2)}, "updates": 0} for _ in range(members)]
    path = save_checkpoint(run_dir / "checkpoints", 400, meta, states)
    return lambda: {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def tiny_spaces() -> dict[str, dict[str, str]]:
    spaces = preflight(load_config(TINY))
    return agent_spaces(spaces[0], spaces[1])


def check(run_dir: Path, config: Path, *sets: str) -> Path:
    cfg = load_config(config, list(sets))
    spaces = preflight(cfg)
    return check_resume(run_dir, cfg, agent_spaces(spaces[0], spaces[1]),
                        league=cfg.league.enabled)


def test_a_fitting_config_passes_and_names_the_latest_checkpoint(tmp_path: Path) -> None:
    saved_run(tmp_path, spaces=tiny_spaces())
    assert check(tmp_path, TINY).name == "step-000000000400"


def test_the_member_count_is_named_with_both_numbers(tmp_path: Path) -> None:
    saved_run(tmp_path, members=4, spaces=tiny_spaces())
    with pytest.raises(ConfigError, match=r"population\.size: the checkpoint has 4 members, "
                                          r"the config 2$"):
        check(tmp_path, TINY)


def test_every_mismatch_is_listed_one_line_each(tmp_path: Path) -> None:
    spaces = tiny_spaces()
    spaces["listener_0"]["observation"] = "Box(-inf, inf, (12,), float32)"
    saved_run(tmp_path, members=2, algorithm="MATD3", spaces=spaces)
    with pytest.raises(ConfigError) as err:
        check(tmp_path, TINY)
    lines = str(err.value).splitlines()
    assert lines[0].endswith("the config does not fit checkpoint step-000000000400:")
    assert lines[1:] == [
        "  algorithm.name: the checkpoint's members run other algorithms: member 0 MATD3 "
        "(config MADDPG), member 1 MATD3 (config MADDPG)",
        "  env: agent listener_0's observation space is Box(-inf, inf, (12,), float32) in the "
        "checkpoint, Box(-inf, inf, (11,), float32) in the config's env"]


def test_other_agents_and_a_missing_league_are_named(tmp_path: Path) -> None:
    saved_run(tmp_path, members=2, algorithm="IPPO",
              spaces={"player_1": {"observation": "x", "action": "y"}})
    with pytest.raises(ConfigError) as err:
        check(tmp_path, TICTACTOE, "population.size=2")
    message = str(err.value)
    assert "env: the checkpoint's agents are ['player_1'], the config's env has " \
           "['player_1', 'player_2']" in message
    assert "league: the config plays a league, the checkpoint is of a run without one" in message


def test_distmarl_train_resume_fails_in_a_moment_without_starting_ray(tmp_path: Path) -> None:
    saved_run(tmp_path / "run", members=4, spaces=tiny_spaces())
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "distmarl.cli", "train", str(TINY), "--quiet",
                           "--no-mlflow", "--resume", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert time.perf_counter() - started < 20  # config and env checks only
    err = done.stderr
    assert "Started a local Ray instance" not in err
    assert "population.size: the checkpoint has 4 members, the config 2" in err
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoints"]
