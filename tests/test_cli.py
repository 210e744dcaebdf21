"""The command line: clear errors for paths that do not exist, real output for real files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.cli import main
from tests.fakes import AGENTS, FIELDS, rows


def test_buffer_info_on_a_missing_path_names_it(tmp_path, capsys) -> None:
    missing = tmp_path / "nothing-here.arrow"
    assert main(["buffer-info", str(missing)]) == 2
    assert f"buffer file {missing} does not exist" in capsys.readouterr().err


def test_buffer_info_prints_counters(tmp_path, capsys) -> None:
    buf = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=0)
    buf.add(rows(np.arange(20)))
    path = buf.save(tmp_path / "b.arrow")
    assert main(["buffer-info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["size"], info["counter"], info["config"]["memory_size"]) == (20, 20, 50)


def test_buffer_info_on_a_foreign_file(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.arrow"
    bad.write_text("hello")
    assert main(["buffer-info", str(bad)]) == 2
    assert "bad.arrow is not a readable" in capsys.readouterr().err


def test_distmarl_warnings_print_as_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A warning of distmarl's own (a competitive game without a league) is one line on
    stderr; other packages' warnings keep Python's form (file and line)."""
    import warnings

    from distmarl import cli
    from distmarl.factory import CompetitiveGameWarning

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = cli._show_warning
        warnings.warn("fitness is a coin toss", CompetitiveGameWarning, stacklevel=1)
        warnings.warn("someone else's", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err.startswith("distmarl: warning: fitness is a coin toss\n")
    assert "UserWarning: someone else's" in err


def test_train_says_how_each_groups_images_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    """What ``distmarl train`` prints of an image layout: one line per agent group, from the
    preflight's build (connect four's board, channels last)."""
    from pathlib import Path

    from distmarl import cli
    from distmarl.algorithms.common import observations
    from distmarl.config import load_config
    from distmarl.factory import preflight

    observations._said.clear()
    cli.show_layouts()
    config = Path(__file__).parents[1] / "examples" / "configs" / "connect_four_ippo_league.yaml"
    preflight(load_config(config))
    err = capsys.readouterr().err
    assert ("distmarl: agent group 'player': image (6, 7, 2) read as channels last (6x7, 2 "
            "channels)") in err
    assert err.count("read as") == 1


def test_python_dash_m_distmarl_runs_the_command(tmp_path) -> None:
    """``python -m distmarl`` is the ``distmarl`` command: its help, and its errors' exit
    status."""
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "distmarl", "--help"], capture_output=True,
                        text=True, timeout=120)
    assert ok.returncode == 0 and "train" in ok.stdout and "buffer-info" in ok.stdout
    missing = subprocess.run([sys.executable, "-m", "distmarl", "buffer-info",
                              str(tmp_path / "nothing.arrow")], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode != 0 and "nothing.arrow" in missing.stderr + missing.stdout


def test_the_export_command_offers_every_format_export_writes() -> None:
    """The parser names the formats itself (building it imports no torch): the same as
    :data:`distmarl.export.FORMATS`."""
    from distmarl.cli import EXPORT_FORMATS
    from distmarl.export import FORMATS

    assert EXPORT_FORMATS == FORMATS
