"""A learner group reads its members' batches one round ahead: each round's read goes out when
the round before it ends, with that round's TD errors; what a member held or had on its way
before it changed (new hyperparameters, a copy, a mutation) is never learned, and the other
members keep theirs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from distmarl.runtime.actors import group as group_module
from distmarl.runtime.actors.clients import LocalBuffer
from distmarl.runtime.actors.group import LearnerGroup
from distmarl.runtime.actors.readahead import ReadAhead
from distmarl.types import JoinedSample, SampleRequest
from tests.runtime.actors.test_group import filled_run


class Recording(LocalBuffer):
    """The run's buffer, each joined read's requests kept (what was read, and when)."""

    def __init__(self, shell: object) -> None:
        super().__init__(shell)
        self.reads: list[list[SampleRequest]] = []

    def sample_joined(self, requests: Sequence[SampleRequest]) -> JoinedSample:
        self.reads.append(list(requests))
        return super().sample_joined(requests)


def _shape(reads: list[SampleRequest]) -> list[tuple[str, int, int]]:
    return [(r.consumer, r.batch_size, r.num_batches) for r in reads]


def test_reads_go_one_round_ahead_with_their_td_errors_and_skip_a_changed_member(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_module, "ROUND_UPDATES", 4)
    run = filled_run(tmp_path, "run", "MADDPG")
    try:
        shells = run.fleet.learners[:2]
        buffer = Recording(run.fleet.shards[0])
        for s in shells:
            s.buffer = buffer
        group = LearnerGroup(shells, ReadAhead())
        done = group.pull()
        assert [r.updates for r in done.values()] == [4, 4]
        assert _shape(buffer.reads[0]) == [("learner-0", 32, 4), ("learner-1", 32, 4)]
        # the next read is on its way (in one process: made when taken), with the TD errors
        assert all(s._priorities is None for s in shells)
        group.pull()
        assert _shape(buffer.reads[1]) == [("learner-0", 32, 4), ("learner-1", 32, 4)]
        assert all(r.priorities is not None for r in buffer.reads[1])
        assert all(r.pace is not None and r.pace.member == k
                   for k, r in enumerate(buffer.reads[1]))
        # member 1 changes: its part of the read on its way is dropped (it learns nothing
        # this round), member 0 keeps its own; the next read asks for both, member 1's anew
        shells[1].set_hyperparameters({"batch_size": 16})
        done = group.pull()
        assert [r.updates for r in done.values()] == [4, 0]
        assert len(buffer.reads) == 3
        # the data earned member 0 12 updates (its first chunks were stored before the buffer
        # held learning_starts rows), member 1 14: 2 left, of which 4 were dropped
        done = group.pull()
        assert _shape(buffer.reads[3]) == [("learner-0", 32, 4), ("learner-1", 16, 4)]
        assert [r.updates for r in done.values()] == [0, 2]
        assert [r.updates for r in group.pull().values()] == [0, 0]
        assert [s.updates for s in shells] == [12, 10]
    finally:
        run.fleet.close()


def test_batches_held_by_a_member_that_changed_are_not_learned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round of member 0 alone (settling it) leaves member 1's part of the read on its way
    held; member 1 is then copied (of itself): what it held is dropped."""
    monkeypatch.setattr(group_module, "ROUND_UPDATES", 4)
    run = filled_run(tmp_path, "run", "MADDPG")
    try:
        shells = run.fleet.learners[:2]
        buffer = Recording(run.fleet.shards[0])
        for s in shells:
            s.buffer = buffer
        group = LearnerGroup(shells, ReadAhead())
        group.pull()
        group.pull([0])  # the read of 4 each arrives: member 1's part is held
        held = group.reads._held[1][1]
        assert len(held.data) == 4 and held.indices is not None and len(held.indices) == 128
        shells[1].load_state(shells[1].get_state())  # a copy (of itself): its reads change
        done = group.pull()
        assert done[1].updates == 0 and 1 not in group.reads._held
        assert shells[1].updates == 4
    finally:
        run.fleet.close()
