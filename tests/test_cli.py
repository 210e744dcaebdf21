"""The command line: clear errors for paths that do not exist, real output for real files."""

from __future__ import annotations

import json

import numpy as np

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
