"""The scheduler's rules, called directly (no Ray): collection, the on-policy policy-lag
bound, settling at a boundary, what learners report, and a failed call's accounting."""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np
import pytest

from distmarl.runtime.logic.datapath import OffPolicyPath, OnPolicyPath
from distmarl.runtime.logic.run_state import RUN, WAIT, MemberState, RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler


class Collected(NamedTuple):
    env_steps: int
    version: int


class Learned(NamedTuple):
    updates: int
    weights: tuple[int, Any] | None


def make(path: Any, members: int = 1, workers: int = 1, num_envs: int = 2,
         boundary: int = 10_000, learn_step: int = 4) -> tuple[Scheduler, RunState]:
    state = RunState()
    state.members = [MemberState(i, boundary, {"learn_step": learn_step})
                     for i in range(members)]
    return Scheduler(path, state, workers, num_envs), state


def kinds(calls: list[Call]) -> list[tuple[str, int, int]]:
    return [(c.kind, c.member, c.worker) for c in calls]


def test_off_policy_members_collect_without_waiting_for_their_learners() -> None:
    """Chunks of 8 steps x 2 envs, one worker each: a chunk in flight at a time per worker,
    whatever the learner did (the buffer paces learning, and makes writers wait)."""
    sched, state = make(OffPolicyPath(8), members=2, workers=2)
    for n in range(1, 6):
        calls = sched.next_calls()
        assert kinds(calls) == [("collect", 0, 0), ("collect", 0, 1), ("collect", 1, 0),
                                ("collect", 1, 1)]
        assert sched.next_calls() == []  # every worker busy
        for c in calls:
            sched.on_result(c, Collected(16, 0))
        assert state.total_env_steps == state.buffer_rows == 64 * n
    assert [m.updates for m in state.members] == [0, 0]


def test_learners_reports_count_updates_and_hand_on_newer_weights() -> None:
    sched, state = make(OffPolicyPath(8))
    m = state.members[0]
    sched.on_result(Call("learned", 0), Learned(8, (2, ["box-2"])))
    assert (m.updates, m.version, m.weights_box, m.published_latest) == (8, 2, ["box-2"], True)
    sched.on_result(Call("learned", 0), Learned(3, None))  # learned since, not published
    assert m.updates == 11 and not m.published_latest
    sched.on_result(Call("learned", 0), Learned(0, (1, ["box-1"])))  # an older report, late
    assert (m.version, m.weights_box) == (2, ["box-2"])
    [collect] = sched.next_calls()
    assert collect.version == 2  # its workers act with the newest


def test_a_member_settles_once_its_chunks_are_stored_then_waits() -> None:
    """Boundary 32 env steps: two chunks; the settle call goes once both are in, and the
    member waits for its evolution step only once its learner settled."""
    sched, state = make(OffPolicyPath(8), workers=2, boundary=32)
    m = state.members[0]
    first, second = sched.next_calls()
    sched.on_result(first, Collected(16, 0))
    assert sched.next_calls() == [] and not sched.at_boundary(0)  # one chunk still out
    sched.on_result(second, Collected(16, 0))
    [settle] = sched.next_calls()
    assert settle == Call("settle", 0) and sched.next_calls() == []
    assert not sched.at_boundary(0)  # its learner is settling
    sched.on_result(settle, Learned(8, (1, ["box"])))
    assert m.updates == 8 and m.version == 1
    assert sched.at_boundary(0) and m.phase == WAIT
    m.next_boundary(32, 1_000)  # its evolution step done: on to the next boundary
    assert m.phase == RUN and kinds(sched.next_calls()) == [("collect", 0, 0),
                                                            ("collect", 0, 1)]


def test_a_failed_call_is_accounted_for() -> None:
    """A failed collect call's steps are scheduled again and reported lost; a failed settle
    call is made again; both leave the member free for the next call."""
    sched, state = make(OffPolicyPath(8), boundary=16)
    m = state.members[0]
    [collect] = sched.next_calls()
    assert m.scheduled_steps == 16
    assert sched.on_failure(collect) == 16
    assert m.scheduled_steps == 0 and m.env_steps == 0 and state.total_env_steps == 0
    [collect] = sched.next_calls()
    sched.on_result(collect, Collected(16, 0))
    [settle] = sched.next_calls()
    assert sched.on_failure(settle) == 0 and sched.idle(0)
    assert sched.next_calls() == [Call("settle", 0)]


class FakeMember:
    """A member's buffer rows as a FIFO of fragments ``(number, the updates its policy
    had)``; the learner learns the oldest first, whenever it is asked to report."""

    def __init__(self) -> None:
        self.buffer: deque[tuple[int, int]] = deque()
        self.updates = 0
        self.lags: list[int] = []
        self.learned: list[int] = []
        self.written = 0

    def collect(self, call: Call) -> Collected:
        self.buffer.append((self.written, call.version))
        self.written += 1
        return Collected(call.steps * 2, call.version)

    def learn(self, most: int) -> Learned:
        n = 0
        while self.buffer and n < most:
            number, policy = self.buffer.popleft()
            self.lags.append(self.updates - policy)
            self.learned.append(number)
            self.updates += 1
            n += 1
        return Learned(n, (self.updates, [None]) if n else None)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_on_policy_fragments_are_learned_once_with_bounded_lag(workers: int) -> None:
    """Calls finish and learners report in random order; every fragment is learned once, at
    most ``workers`` updates after the policy that collected it (one worker: 0 or 1)."""
    sched, state = make(OnPolicyPath(), members=2, workers=workers, num_envs=2,
                        boundary=2_000, learn_step=4)
    fakes = [FakeMember() for _ in state.members]
    rng = np.random.default_rng(workers)
    inflight: list[Call] = []
    for _ in range(20_000):
        inflight += sched.next_calls()
        member = int(rng.integers(2))
        if rng.random() < 0.3:  # the learner learned (the coordinator hears it later)
            sched.on_result(Call("learned", member), fakes[member].learn(int(rng.integers(3))))
            continue
        if not inflight:
            if all(m.phase == WAIT for m in state.members):
                break
            continue
        call = inflight.pop(int(rng.integers(len(inflight))))  # any call may finish next
        fake = fakes[call.member]
        result = fake.collect(call) if call.kind == "collect" else fake.learn(10**6)
        sched.on_result(call, result)
        sched.at_boundary(call.member)
    assert not inflight
    for fake, m in zip(fakes, state.members):
        assert m.env_steps >= 2_000 and m.owed == 0 and not fake.buffer
        assert sorted(fake.learned) == list(range(fake.written))  # each fragment once
        assert m.updates == fake.written
        assert max(fake.lags) <= workers, fake.lags
        if workers == 1:
            assert set(fake.lags) <= {0, 1}
        assert m.phase == WAIT


def test_on_policy_fragments_ahead_bound() -> None:
    """One worker: the next fragment is collected while the last is learned, no further.
    Three workers: three fragments between a fragment's policy and its update at most."""
    sched, state = make(OnPolicyPath(), workers=1, learn_step=4)
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0)] and calls[0].steps == 4
    sched.on_result(calls[0], Collected(8, 0))
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0)]  # while the first is learned
    sched.on_result(calls[0], Collected(8, 0))
    assert sched.next_calls() == []  # two waiting: no third fragment yet
    sched.on_result(Call("learned", 0), Learned(1, (1, [None])))
    assert kinds(sched.next_calls()) == [("collect", 0, 0)]

    sched, state = make(OnPolicyPath(), workers=3, learn_step=4)
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0), ("collect", 0, 1), ("collect", 0, 2)]
    for c in calls:
        sched.on_result(c, Collected(8, 0))
    assert state.members[0].owed == 3
    # the fourth fragment, collected meanwhile, is learned 3 updates after its policy
    [fourth] = sched.next_calls()
    assert kinds([fourth]) == [("collect", 0, 0)] and sched.next_calls() == []
    sched.on_result(Call("learned", 0), Learned(3, (3, [None])))
    assert state.members[0].owed == 0
    assert sched.next_calls() == []  # a fifth would be learned after the fourth: lag 4
    sched.on_result(fourth, Collected(8, 0))
    assert len(sched.next_calls()) == 3


def test_the_data_path_is_chosen_once_from_the_algorithm() -> None:
    from pathlib import Path

    from distmarl.config import load_config
    from distmarl.runtime.logic.datapath import make_datapath

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
    cfg = load_config(tiny, ["training.chunk_steps=12"])
    path = make_datapath(cfg.algorithm.name, cfg.training)
    assert isinstance(path, OffPolicyPath) and not path.resyncs_fragments
    assert path.chunk_steps == 12
    assert isinstance(make_datapath("MAPPO", cfg.training), OnPolicyPath)
