"""The update-to-data rule where the data is: updates earned by a member's stored env steps,
granted to its learner's paced reads, and writers that wait for a learner owing too many."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.buffers.grants import UpdateGrants
from distmarl.config.replay import UpdateRule
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.types import Pace, ReadSpec, SampleRequest, TransitionChunk
from tests.fakes import AGENTS, FIELDS, rows


def test_updates_are_earned_per_learn_step_past_the_delay_once_learning_starts() -> None:
    """learn_step 4, learning_delay 100, learning_starts 16 rows: stores of 8 env steps."""
    grants = UpdateGrants(UpdateRule(learning_starts=16, learning_delay=100))
    pace = Pace(0, 4.0)
    grants.inserted(0, 96, buffer_rows=96)  # within the delay: nothing counts
    assert grants.owed(pace) == 0
    grants.inserted(0, 8, buffer_rows=104)  # 96..104: the 4 steps past 100 count
    assert grants.owed(pace) == 1
    grants.inserted(0, 8, buffer_rows=112)
    assert grants.owed(pace) == 3
    grants.grant(0, 2)
    assert grants.owed(pace) == 1
    other = UpdateGrants(UpdateRule(learning_starts=16, learning_delay=0))
    other.inserted(1, 8, buffer_rows=15)  # before learning_starts rows: never counts
    other.inserted(1, 8, buffer_rows=23)
    assert other.owed(Pace(1, 4.0)) == 2


def test_fractions_carry_over_and_a_new_learn_step_applies_to_new_steps() -> None:
    grants = UpdateGrants(UpdateRule(0, 0))
    grants.inserted(0, 10, buffer_rows=10)
    assert grants.owed(Pace(0, 3.0)) == 3  # 10 / 3: a third carried
    grants.inserted(0, 2, buffer_rows=12)
    assert grants.owed(Pace(0, 3.0)) == 4  # 12 / 3
    grants.grant(0, 4)
    grants.inserted(0, 8, buffer_rows=20)
    assert grants.owed(Pace(0, 2.0)) == 4  # the 8 new steps at the learn_step read with
    state = grants.state_dict()
    again = UpdateGrants(UpdateRule(0, 0))
    again.load_state_dict(state)
    assert again.owed(Pace(0, 2.0)) == 4 and again.state_dict() == state


def test_writers_wait_while_the_learner_owes_more_than_max_owed() -> None:
    grants = UpdateGrants(UpdateRule(0, 0), max_owed=8)
    grants.inserted(0, 16, buffer_rows=16)
    assert not grants.may_insert(0)  # before its first read, each step as one update
    assert grants.owed(Pace(0, 4.0)) == 4 and grants.may_insert(0)
    grants.inserted(0, 32, buffer_rows=48)
    assert not grants.may_insert(0)  # 12 owed
    grants.grant(0, 4)
    assert grants.may_insert(0) and grants.may_insert(1)  # 8 owed; another member owes none
    with pytest.raises(ValueError, match="max_owed"):
        UpdateGrants(UpdateRule(0, 0), max_owed=-1)


def kwargs() -> dict:
    return {"memory_size": 1_000, "field_names": FIELDS, "agent_ids": AGENTS, "seed": 0}


def request(member: int, batches: int) -> SampleRequest:
    return SampleRequest(f"learner-{member}", 8, batches, ReadSpec.replay(), None,
                         Pace(member, 2.0))


def test_the_buffer_grants_paced_reads_what_the_data_earned() -> None:
    """Member 0 stored 20 env steps (10 updates at learn_step 2), member 1 four (2): reads of
    up to 6 batches each are granted 6 and 2, then 4 and 0; an unpaced read takes all asked."""
    shell = BufferShell(kwargs(), UpdateGrants(UpdateRule(0, 0)))
    assert shell.add(TransitionChunk(rows(np.arange(20)), 0, env_steps=20)).accepted
    assert shell.add(TransitionChunk(rows(np.arange(20, 24)), 1, env_steps=4)).accepted
    first = shell.sample_joined([request(0, 6), request(1, 6)])
    assert [sum(1 for u in first.rows if u[k]) for k in range(2)] == [6, 2]
    second = shell.sample([request(0, 6), request(1, 6)])
    assert [len(b) for b in second] == [4, 0]
    unpaced = shell.sample([request(0, 6)._replace(pace=None)])
    assert len(unpaced[0]) == 6
    # the grants travel with the buffer's state
    restored = BufferShell(kwargs())
    restored.load_state_dict(shell.state_dict())
    assert restored.grants.state_dict() == shell.grants.state_dict()


def test_a_members_chunk_waits_while_its_learner_owes_too_many() -> None:
    shell = BufferShell(kwargs(), UpdateGrants(UpdateRule(0, 0), max_owed=4))
    shell.sample([request(0, 0)])  # the learner's first read: learn_step 2
    assert shell.add(TransitionChunk(rows(np.arange(10)), 0, env_steps=10)).accepted  # 5 owed
    refused = shell.add(TransitionChunk(rows(np.arange(10, 20)), 0, env_steps=10))
    assert not refused.accepted and refused.rows == 0 and shell.refused_chunks == 1
    assert not shell.room(0, 10) and shell.room(1, 10)  # what a refused writer asks after
    assert shell.add(TransitionChunk(rows(np.arange(10, 20)), 1, env_steps=10)).accepted
    shell.sample([request(0, 1)])  # 4 owed: the writer may store again
    assert shell.room(0, 10)
    assert shell.add(TransitionChunk(rows(np.arange(20, 30)), 0, env_steps=10)).accepted
