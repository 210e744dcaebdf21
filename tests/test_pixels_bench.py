"""benchmarks/pixels.py's pure parts: the raw bytes of a stored pistonball row, peak memory
readings, and the report's ratio."""

from __future__ import annotations

import os

import pytest

from benchmarks.baselines.agilerl_ippo import peak_rss_mib, private_rss_mib
from benchmarks.system.pixels import CONFIG, report, row_bytes

pytest.importorskip("pymunk")


def test_a_pistonball_row_is_every_pistons_uint8_frame_stack() -> None:
    from distmarl.config import load_config

    cfg = load_config(CONFIG, [])
    assert row_bytes(cfg) == 20 * 64 * 64 * 4  # 20 pistons, 64x64 grey, 4 frames, 1 byte


def test_peak_rss_reads_this_process_and_nothing_for_a_missing_one() -> None:
    peak = peak_rss_mib(os.getpid())
    assert peak is not None and peak > 10  # a python with numpy is well over 10 MiB
    assert peak_rss_mib(2**22 + 12345) is None  # above Linux's pid_max default
    private = private_rss_mib(os.getpid())
    assert private is not None and 10 < private <= peak + 1
    assert private_rss_mib(2**22 + 12345) is None


def test_report_prints_the_ratio_of_env_steps_per_second(capsys) -> None:
    ours = {"env_steps": 1000, "env_steps_per_s": 30.0, "setup_seconds": 5.0,
            "peak_rss_mib": {"buffer": 1300.0}, "private_rss_mib": {"buffer": 1200.0},
            "buffer": {"capacity_rows": 4, "row_bytes": 8, "capacity_mib": 1.0,
                       "rss_over_capacity": 1.1, "private_over_capacity": 1.05}}
    theirs = {"env_steps": 1000, "env_steps_per_s": 12.0, "torch_threads": 2,
              "peak_rss_mib": {"trainer": 2000.0}}
    report(ours, theirs)
    out = capsys.readouterr().out
    assert "2.50x" in out and "1.100" in out and "1.050" in out and "trainer" in out


def test_counted_learn_counts_and_restores_the_class() -> None:
    from benchmarks.baselines.agilerl_runner import counted_learn

    class Base:
        def learn(self, x: int) -> int:
            return 2 * x

    class Child(Base):
        pass

    with counted_learn(Child) as calls:
        assert Child().learn(3) == 6 and Base().learn(1) == 2  # the parent is not counted
    assert calls == [1] and "learn" not in Child.__dict__  # inherited again afterwards
    with counted_learn(Base) as calls:
        Base().learn(1)
        Base().learn(2)
    assert calls == [2] and Base().learn(4) == 8


def test_env_step_times_cover_both_stacks() -> None:
    from benchmarks.system.pixels import CONFIG, env_step_ms

    ms = env_step_ms(CONFIG, steps=5, repeats=1)
    assert set(ms) == {"supersuit", "distmarl"} and all(0 < v < 1000 for v in ms.values())
