"""The two mix-in modes: ``mixin="rllib"`` against RLlib's own test, ``"fixed"`` beside it.

The ``rllib`` assertions are ported from RLlib 2.60, ``rllib/utils/replay_buffers/tests/
test_multi_agent_mixin_replay_buffer.py`` (``test_mixin_sampling_timesteps``, and the batch
sizes of ``test_mixin_sampling_episodes``), one row per ``add`` as RLlib's single-timestep
batches are. RLlib returns an empty batch where distmarl returns None (counted as 0 rows);
RLlib's ``replay_ratio=1.0`` (replay only) is distmarl's ``replay_ratio=None``, its ``0.0`` (new
rows only) a stream read (``ReadSpec.stream()``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.io import read_state
from distmarl.types import ReadSpec
from tests.fakes import AGENTS, FIELDS, rows

CAPACITY = 10
#: A buffer file written before the ``mixin`` setting existed (its config has no ``mixin``):
#: a 64-row buffer with rows 0..49, seed 3, replay_ratio 0.5; consumer "learner" sampled once
#: (8 rows, fixed mix-in) before rows 40..49 arrived, "stream" streamed rows 0..7.
BEFORE_MIXIN = Path(__file__).parent / "data" / "buffer_before_mixin.arrow"


class Rows:
    """A buffer fed one row per ``add`` (row ids count up) and the batch sizes it returns."""

    def __init__(self, replay_ratio: float | None, mixin: str = "rllib",
                 capacity: int = CAPACITY) -> None:
        stream = replay_ratio == 0.0  # RLlib's 0.0: new rows only, a stream read here
        self.buf = MultiAgentReplayBuffer(capacity, FIELDS, AGENTS, seed=0, mixin=mixin,
                                          replay_ratio=None if stream else replay_ratio)
        if stream:
            self.buf.register("learner", ReadSpec.stream())
        self.next_id = 0

    def add(self, n: int = 1) -> None:
        self.buf.add(rows(np.arange(self.next_id, self.next_id + n)))
        self.next_id += n

    def sample(self, batch_size: int) -> int:
        batch = self.buf.read(batch_size, "learner")
        return 0 if batch is None else len(batch.indices)


def test_mixin_sampling_timesteps_as_rllib() -> None:
    """RLlib: ``test_mixin_sampling_timesteps``."""
    b = Rows(0.333)
    assert b.sample(10) == 0  # buffer empty
    results = []
    for _ in range(100):  # insert 2x, sample 3: 2 new and 1 old on average
        b.add()
        b.add()
        results.append(b.sample(3))
    assert np.mean(results) == pytest.approx(3.0, abs=0.2)
    results = []
    for _ in range(100):  # insert 1x, sample 5: 1 new and 0.5 old on average
        b.add()
        results.append(b.sample(5))
    assert np.mean(results) == pytest.approx(1.5, abs=0.2)

    b = Rows(0.9)
    results = []
    for _ in range(100):  # 1 new and 9 old
        b.add()
        results.append(b.sample(10))
    assert np.mean(results) == pytest.approx(10.0, abs=0.2)

    b = Rows(0.0)  # only new rows
    b.add()
    assert b.sample(1) == 1
    assert b.sample(1) == 0  # nothing new, no replay allowed
    results = []
    for _ in range(100):
        b.add()
        results.append(b.sample(1))
    assert np.mean(results) == pytest.approx(1.0, abs=0.2)

    b = Rows(None)  # RLlib's replay_ratio=1.0: replay only
    assert b.sample(1) == 0  # buffer empty
    b.add()
    assert b.sample(1) == 1
    assert b.sample(1) == 1  # replayed
    assert np.mean([b.sample(1) for _ in range(100)]) == pytest.approx(1.0)


def test_mixin_sampling_half_replay_as_rllib() -> None:
    """RLlib: ``test_mixin_sampling_episodes``' batch sizes (replay_ratio 0.5, add one unit,
    sample 2: exactly one new and one replayed every time)."""
    b = Rows(0.5)
    results = []
    for _ in range(20):
        b.add()
        results.append(b.sample(2))
    assert np.mean(results) == 2.0


def test_rllib_mode_returns_the_oldest_unread_rows_and_keeps_the_rest_queued() -> None:
    b = Rows(0.5, capacity=100)
    b.add(10)
    first = b.buf.read(4, "learner")
    assert first.num_new == 2 and first.indices[:2].tolist() == [0, 1]  # oldest first
    second = b.buf.read(4, "learner")
    assert second.indices[:2].tolist() == [2, 3]  # the rest stayed queued
    seen = [*first.indices[:2], *second.indices[:2]]
    while (batch := b.buf.read(4, "learner")) is not None:
        seen.extend(batch.indices[:batch.num_new])
    assert seen == list(range(10))  # every row exactly once, in order; then nothing
    assert b.buf.stats()["consumers"]["learner"]["skipped"] == 0


def test_fixed_mode_differs_from_rllib_as_documented() -> None:
    """The same feed as RLlib's test in the default mode: every batch is ``batch_size`` rows,
    the newest unread rows first, older unread rows skipped."""
    b = Rows(0.333, mixin="fixed")
    b.add(6)
    batch = b.buf.read(3, "learner")
    assert len(batch.indices) == 3 and batch.num_new == 2
    assert batch.indices[:2].tolist() == [4, 5]  # the newest two; rows 0..3 skipped
    assert b.buf.stats()["consumers"]["learner"]["skipped"] == 4
    assert [b.sample(5) for _ in range(3)] == [5, 5, 5]  # nothing new: all replay
    rllib = Rows(0.333)
    rllib.add(6)
    assert rllib.buf.read(3, "learner").indices[:2].tolist() == [0, 1]


def test_rllib_mode_with_members_and_prioritised_replay() -> None:
    buf = MultiAgentReplayBuffer(100, FIELDS, AGENTS, seed=0, replay_ratio=0.5, mixin="rllib",
                                 prioritized={"alpha": 0.6, "beta": 0.4, "eps": 1e-6})
    buf.add(rows(np.arange(0, 6)), member=0)
    buf.add(rows(np.arange(6, 12)), member=1)
    buf.register("m1", ReadSpec.mixin(0.5, member=1))
    batch = buf.read(4, "m1")
    assert batch.num_new == 2 and batch.indices[:2].tolist() == [6, 7]
    assert set(batch.indices[2:].tolist()) <= set(range(6, 12))  # member 1's replay only
    assert batch.weights is not None and len(batch.weights) == len(batch.indices)


def test_mixin_setting_travels_with_the_state_and_rejects_unknown_modes(tmp_path) -> None:
    b = Rows(0.5)
    b.add(4)
    b.sample(2)
    loaded = MultiAgentReplayBuffer.load(b.buf.save(tmp_path / "b.arrow"))
    assert loaded.mixin == "rllib" and loaded.consumers["learner"].cursor == 1
    with pytest.raises(ValueError, match=r"mixin must be one of \['fixed', 'rllib'\], got 'newest'"):
        MultiAgentReplayBuffer(10, FIELDS, AGENTS, mixin="newest")


def test_buffer_files_written_before_the_setting_load_as_fixed() -> None:
    """A file whose config has no ``mixin`` (written by the code before the setting) loads in
    the fixed mode with its consumers and generator, and continues as it would have: the next
    sample was recorded when the file was written."""
    assert "mixin" not in read_state(BEFORE_MIXIN)["meta"]["config"]
    buf = MultiAgentReplayBuffer.load(BEFORE_MIXIN)
    assert buf.mixin == "fixed" and buf.counter == 50
    assert buf.consumers["stream"].cursor == 8 and buf.consumers["learner"].skipped == 36
    nxt = buf.read(8, "learner")
    assert nxt.num_new == 4 and nxt.indices.tolist() == [46, 47, 48, 49, 9, 40, 43, 29]
    # the same state in a buffer built in the rllib mode: the queued rows come oldest first
    rllib = MultiAgentReplayBuffer(64, FIELDS, AGENTS, seed=3, replay_ratio=0.5, mixin="rllib")
    rllib.load_state_dict(read_state(BEFORE_MIXIN))
    assert rllib.read(8, "stream").indices[:4].tolist() == [8, 9, 10, 11]
