"""A learner group reads its members' batches one call ahead: each call's read goes out when the
call before it ends, with that call's TD errors; what a member held or had on its way before it
changed (new hyperparameters, a copy, a mutation) is never learned, and the other members keep
theirs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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


def test_reads_go_one_call_ahead_with_their_td_errors_and_skip_a_changed_member(
        tmp_path: Path) -> None:
    run = filled_run(tmp_path, "run", "MADDPG")
    try:
        shells = run.fleet.learners[:2]
        buffer = Recording(run.fleet.buffer)
        for s in shells:
            s.buffer = buffer
        group = LearnerGroup(shells, ReadAhead())
        done = group.train_many({0: 4, 1: 4})
        assert [r.updates for r in done.values()] == [4, 4]
        assert _shape(buffer.reads[0]) == [("learner-0", 32, 4), ("learner-1", 32, 4)]
        # the next read is on its way (in one process: made when taken), with the TD errors
        assert all(s._priorities is None for s in shells)
        group.train_many({0: 4, 1: 4})
        assert _shape(buffer.reads[1]) == [("learner-0", 32, 4), ("learner-1", 32, 4)]
        assert all(r.priorities is not None for r in buffer.reads[1])
        # member 1 changes: its part of the read on its way is dropped, member 0 keeps its own
        shells[1].set_hyperparameters({"batch_size": 16})
        done = group.train_many({0: 4, 1: 4})
        assert [r.updates for r in done.values()] == [4, 4]
        assert len(buffer.reads) == 4
        assert _shape(buffer.reads[2]) == [("learner-0", 32, 4), ("learner-1", 32, 4)]
        assert _shape(buffer.reads[3]) == [("learner-1", 16, 4)]
        # a call of fewer updates leaves the rest held for the next, which reads only its rest
        group.train_many({0: 2, 1: 2})
        assert len(buffer.reads) == 5  # the read sent after the last call, of 4 each
        group.train_many({0: 3, 1: 3})
        assert _shape(buffer.reads[5]) == [("learner-0", 32, 1), ("learner-1", 16, 1)]
        assert [s.updates for s in shells] == [17, 17]
    finally:
        run.fleet.close()


def test_batches_held_by_a_member_that_changed_are_not_learned(tmp_path: Path) -> None:
    run = filled_run(tmp_path, "run", "MADDPG")
    try:
        shells = run.fleet.learners[:1]
        buffer = Recording(run.fleet.buffer)
        shells[0].buffer = buffer
        group = LearnerGroup(shells, ReadAhead())
        group.train_many({0: 4})
        group.train_many({0: 1})  # the read of 4 arrives: 1 learned, 3 held
        held = group.reads._held[0][1]
        assert len(held.data) == 3 and held.indices is not None and len(held.indices) == 96
        shells[0].load_state(shells[0].get_state())  # a copy (of itself): its reads change
        group.train_many({0: 2})
        assert _shape(buffer.reads[-1]) == [("learner-0", 32, 2)]
        assert 0 not in group.reads._held and shells[0].updates == 7
    finally:
        run.fleet.close()
