"""Output piped into a reader that stops ends the command quietly, as git and ls do: no
traceback, exit status 141 (128 + SIGPIPE), whatever the command printed. (``--help``, which
argparse writes itself, dropping a failed write, ends with 0.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXIT_BROKEN_PIPE = 141  # distmarl.cli.EXIT_BROKEN_PIPE: 128 + SIGPIPE

TINY = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"
COMMANDS = [["config", "schema"], ["config", "reference"], ["config", "show", str(TINY)]]
HELP = [["--help"], ["config", "--help"]]


def _closed_pipe_run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``distmarl ARGS`` writing into a pipe whose reader has already stopped (its read end
    closed before the command starts: every write fails)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "distmarl", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_reader_that_stopped_ends_the_command_quietly(args: list[str]) -> None:
    done = _closed_pipe_run(args)
    assert done.stderr == ""
    assert done.returncode == EXIT_BROKEN_PIPE


@pytest.mark.parametrize("args", HELP, ids=" ".join)
def test_help_into_a_reader_that_stopped_ends_quietly(args: list[str]) -> None:
    done = _closed_pipe_run(args)
    assert done.stderr == ""
    assert done.returncode == 0


def test_head_reads_the_first_lines_of_a_long_output() -> None:
    """``distmarl config schema | head -n 2`` in a shell: head's two lines, nothing on
    stderr, the pipeline's first status 141 where head closed the pipe before the schema was
    all written (0 where the pipe's buffer took all of it first)."""
    done = subprocess.run(
        f"{sys.executable} -m distmarl config schema | head -n 2; "
        "echo \"status=${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash",
        capture_output=True, text=True, timeout=120)
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "{" and len(lines) == 3 and lines[2] in {"status=141", "status=0"}
