"""The soak benchmark's verdicts (benchmarks.system.soak): the level is taken once the replay
buffer is full, and the object store is judged on an absolute band."""

from __future__ import annotations

import pytest

from benchmarks.system import soak


def _samples(rows: list[tuple[float, float, float | None]]) -> soak.Samples:
    """(seconds, buffer MiB, fill) per sample."""
    s = soak.Samples()
    for t, mib, fill in rows:
        s.add(t, {"buffer": mib, soak.FILL: fill})
    return s


def test_warmup_ends_at_the_first_full_buffer_after_the_minutes() -> None:
    s = _samples([(0, 100, 0.1), (60, 150, 0.6), (120, 190, 1.0), (180, 191, 1.0),
                  (240, 192, 1.0)])
    assert soak.FILL not in s.columns and s.fill == [0.1, 0.6, 1.0, 1.0, 1.0]
    assert soak.warmup_end(s, 60.0) == 120  # minutes passed at 60 s but the buffer filled later
    assert soak.warmup_end(s, 150.0) == 180  # full at 120 s but the minutes ran to 150 s
    v = soak.verdict("buffer", s.times, s.columns["buffer"], 120, 0.10)
    assert v.level == 190 and v.max_dev_mib == pytest.approx(2.0) and v.ok is True
    # taken from the start, the growth while the rings fill fails the 10 % target
    assert soak.verdict("buffer", s.times, s.columns["buffer"], 0, 0.10).ok is False


def test_no_level_when_the_buffer_never_fills() -> None:
    s = _samples([(0, 100, 0.1), (60, 150, None), (120, 190, 0.99)])
    assert soak.warmup_end(s, 0.0) is None


def test_object_store_band_is_absolute_where_wider_than_the_percentage() -> None:
    times, store = [0.0, 60.0, 120.0], [3.0, 1.8, 3.8]  # MiB in flight, coming and going
    assert soak.verdict("objstore", times, store, 0, 0.10).ok is False
    assert soak.verdict("objstore", times, store, 0, 0.10, band_mib=8.0).ok is True
    leak = [3.0, 9.0, 15.0]
    v = soak.verdict("objstore", times, leak, 0, 0.10, band_mib=8.0)
    assert v.ok is False and v.max_dev_mib == pytest.approx(12.0)
