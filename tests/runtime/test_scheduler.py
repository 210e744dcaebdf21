"""The scheduler's rules, called directly (no Ray): the update-to-data ratio, learning_starts,
the off-policy and on-policy policy-lag bounds, and a failed call's accounting."""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np
import pytest

from distmarl.config.replay import UpdateRule
from distmarl.runtime.logic.datapath import (
    MAX_OWED_CALLS,
    MAX_UPDATES_PER_CALL,
    OffPolicyPath,
    OnPolicyPath,
)
from distmarl.runtime.logic.run_state import WAIT, MemberState, RunState
from distmarl.runtime.logic.scheduler import Call, Scheduler


class Collected(NamedTuple):
    env_steps: int
    version: int


class Trained(NamedTuple):
    updates: int
    weights: tuple[int, Any] | None


def make(path: Any, members: int = 1, workers: int = 1, num_envs: int = 2,
         boundary: int = 10_000, learn_step: int = 4) -> tuple[Scheduler, RunState]:
    state = RunState()
    state.members = [MemberState(i, boundary, {"learn_step": learn_step})
                     for i in range(members)]
    return Scheduler(path, state, workers, num_envs), state


def off(chunk: int = 8, starts: int = 0, delay: int = 0, lag: int = 4) -> OffPolicyPath:
    return OffPolicyPath(chunk, UpdateRule(starts, delay), lag)


def kinds(calls: list[Call]) -> list[tuple[str, int, int]]:
    return [(c.kind, c.member, c.worker) for c in calls]


def test_update_to_data_ratio_is_exact_over_a_sequence_of_results() -> None:
    """learn_step 3, chunks of 8 steps x 2 envs: after n chunks the updates asked for plus
    those owed are 16 n / 3 (the fraction is carried to the next chunk), and every update
    asked for was done."""
    sched, state = make(off(chunk=8), learn_step=3)
    m = state.members[0]
    asked = 0
    for n in range(1, 40):
        calls = sched.next_calls()
        collect = [c for c in calls if c.kind == "collect"]
        assert len(collect) == 1 and collect[0].steps == 8
        asked += sum(c.updates for c in calls if c.kind == "train")
        for c in calls:
            if c.kind == "train":
                sched.on_result(c, Trained(c.updates, None))
        sched.on_result(collect[0], Collected(16, m.version))
        assert asked + m.owed == pytest.approx(16 * n / 3)
        assert m.env_steps == state.total_env_steps == state.buffer_rows == 16 * n
    assert m.updates == asked and asked >= 16 * 39 // 3 - 7 and m.owed < 8


def test_learning_starts_and_learning_delay_gate_updates() -> None:
    """No train call before the buffer holds learning_starts rows; updates are earned only by
    steps past learning_delay (per member) once it does."""
    sched, state = make(off(chunk=8, starts=48, delay=40), learn_step=1)
    m = state.members[0]
    for rows, owed in [(16, 0), (32, 0), (48, 8)]:  # the chunk reaching 48: 8 steps past 40
        calls = sched.next_calls()
        assert kinds(calls) == [("collect", 0, 0)]
        sched.on_result(calls[0], Collected(16, 0))
        assert state.buffer_rows == rows and m.owed == owed
    calls = sched.next_calls()
    assert kinds(calls) == [("train", 0, -1), ("collect", 0, 0)] and calls[0].updates == 8
    sched.on_result(calls[1], Collected(16, 0))
    assert m.owed == 16  # past learning_delay, every step earns


def test_off_policy_learner_waits_for_a_slow_worker() -> None:
    """max_policy_lag 2: while a chunk started at version 0 is in flight, the learner may
    publish versions 1 and 2, then waits until the chunk is in."""
    sched, state = make(off(chunk=8, lag=2), workers=2, learn_step=1)
    m = state.members[0]
    m.owed = 40.0
    calls = sched.next_calls()
    assert kinds(calls) == [("train", 0, -1), ("collect", 0, 0), ("collect", 0, 1)]
    slow = calls[2]
    sched.on_result(calls[1], Collected(16, 0))
    for version in (1, 2):
        sched.on_result(calls[0], Trained(calls[0].updates, (version, [None])))
        calls = sched.next_calls()
        train = [c for c in calls if c.kind == "train"]
        assert bool(train) == (version < 2), version  # version 3 would lag the slow chunk by 3
        if train:
            calls = train
        else:
            break
    assert m.version == 2 and 0 not in sched.learner_busy
    assert all(c.kind != "train" for c in sched.next_calls())  # still waiting
    sched.on_result(slow, Collected(16, 0))
    assert m.max_lag_seen == 2
    assert any(c.kind == "train" for c in sched.next_calls())


def test_max_policy_lag_zero_alternates_learning_and_collecting() -> None:
    """Lag 0: no collect call while a train call is in flight, no train call while a chunk is
    being collected: every chunk is collected with the newest weights."""
    sched, state = make(off(chunk=8, lag=0), workers=2, learn_step=1)
    m = state.members[0]
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0), ("collect", 0, 1)]
    for c in calls:
        sched.on_result(c, Collected(16, m.version))
    version = 0
    for _ in range(10):
        calls = sched.next_calls()
        if any(c.kind == "train" for c in calls):
            assert kinds(calls) == [("train", 0, -1)]
            version += 1
            sched.on_result(calls[0], Trained(calls[0].updates, (version, [None])))
        else:
            assert calls and all(c.kind == "collect" and c.version == m.version for c in calls)
            for c in calls:
                sched.on_result(c, Collected(16, c.version))
    assert m.max_lag_seen == 0 and m.updates > 0


def test_off_policy_workers_pause_while_the_learner_owes_too_much() -> None:
    sched, state = make(off(chunk=8, lag=4), learn_step=1)
    m = state.members[0]
    m.owed = MAX_OWED_CALLS * MAX_UPDATES_PER_CALL + MAX_UPDATES_PER_CALL
    calls = sched.next_calls()
    assert kinds(calls) == [("train", 0, -1)]  # owes two full calls after this one: no collect
    sched.on_result(calls[0], Trained(calls[0].updates, (1, [None])))
    assert [c.kind for c in sched.next_calls()] == ["train", "collect"]


class FakeMember:
    """A member's buffer rows as a FIFO of fragments ``(number, the updates its policy
    had)``; the learner learns the oldest fragments first."""

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

    def train(self, call: Call) -> Trained:
        n = 0
        while self.buffer and n < call.updates:
            number, policy = self.buffer.popleft()
            self.lags.append(self.updates - policy)
            self.learned.append(number)
            self.updates += 1
            n += 1
        return Trained(n, (self.updates, [None]) if n else None)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_on_policy_fragments_are_learned_once_with_bounded_lag(workers: int) -> None:
    """Calls finish in random order; every fragment is learned once, at most ``workers``
    updates after the policy that collected it (one worker: 0 or 1)."""
    sched, state = make(OnPolicyPath(), members=2, workers=workers, num_envs=2,
                        boundary=2_000, learn_step=4)
    fakes = [FakeMember() for _ in state.members]
    rng = np.random.default_rng(workers)
    inflight: list[Call] = []
    for _ in range(5_000):
        inflight += sched.next_calls()
        if not inflight:
            break
        call = inflight.pop(int(rng.integers(len(inflight))))  # any call may finish next
        fake = fakes[call.member]
        sched.on_result(call, fake.collect(call) if call.kind == "collect" else fake.train(call))
    assert not inflight and all(sched.idle(m.member) for m in state.members)
    for fake, m in zip(fakes, state.members):
        assert m.env_steps >= 2_000 and m.owed == 0 and not fake.buffer
        assert sorted(fake.learned) == list(range(fake.written))  # each fragment once
        assert m.updates == fake.written
        assert max(fake.lags) <= workers, fake.lags
        if workers == 1:
            assert set(fake.lags) <= {0, 1}
        assert sched.at_boundary(m.member) and m.phase == WAIT


def test_on_policy_fragments_ahead_bound() -> None:
    """One worker: the next fragment is collected while the last is learned, no further.
    Three workers: three fragments between a fragment's policy and its update at most."""
    sched, state = make(OnPolicyPath(), workers=1, learn_step=4)
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0)] and calls[0].steps == 4
    sched.on_result(calls[0], Collected(8, 0))
    calls = sched.next_calls()
    assert kinds(calls) == [("train", 0, -1), ("collect", 0, 0)]
    sched.on_result(calls[1], Collected(8, 0))
    assert sched.next_calls() == []  # one learned, one owed: no third fragment yet

    sched, state = make(OnPolicyPath(), workers=3, learn_step=4)
    calls = sched.next_calls()
    assert kinds(calls) == [("collect", 0, 0), ("collect", 0, 1), ("collect", 0, 2)]
    for c in calls:
        sched.on_result(c, Collected(8, 0))
    assert state.members[0].owed == 3
    calls = sched.next_calls()
    # the fourth fragment, collected meanwhile, is learned 3 updates after its policy
    assert kinds(calls) == [("train", 0, -1), ("collect", 0, 0)] and calls[0].updates == 3
    assert sched.next_calls() == []


def test_a_failed_call_is_accounted_for() -> None:
    """A failed collect call's steps are scheduled again and reported lost; a failed train
    call's updates are owed again; both actors are free for the next call."""
    sched, state = make(off(chunk=8), learn_step=1)
    m = state.members[0]
    m.owed = 5.0
    train, collect = sched.next_calls()
    assert m.scheduled_steps == 16 and m.owed == 0 and m.requested == 5
    assert sched.on_failure(collect) == 16
    assert m.scheduled_steps == 0 and m.env_steps == 0 and state.total_env_steps == 0
    assert sched.on_failure(train) == 5
    assert m.owed == 5 and m.requested == 0 and sched.idle(0)
    assert kinds(sched.next_calls()) == [("train", 0, -1), ("collect", 0, 0)]


def test_a_refused_sample_is_owed_again_off_policy_but_not_on_policy() -> None:
    sched, state = make(off(), learn_step=1)
    state.members[0].owed = 10.0
    train = sched.next_calls()[0]
    sched.on_result(train, Trained(4, (1, [None])))
    assert state.members[0].owed == 6 and state.members[0].updates == 4
    sched, state = make(OnPolicyPath())
    state.members[0].owed = 2.0
    train = sched.next_calls()[0]
    sched.on_result(train, Trained(1, (1, [None])))
    assert state.members[0].owed == 0 and state.members[0].updates == 1


def test_the_data_path_is_chosen_once_from_the_algorithm() -> None:
    from pathlib import Path

    from distmarl.config import load_config
    from distmarl.runtime.logic.datapath import make_datapath

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
    cfg = load_config(tiny, ["training.chunk_steps=12", "replay.learning_starts=77"])
    path = make_datapath(cfg.algorithm.name, cfg.training, cfg.replay)
    assert isinstance(path, OffPolicyPath) and not path.resyncs_fragments
    assert (path.chunk_steps, path.updates.learning_starts) == (12, 77)
    ippo = load_config(tiny, ["algorithm.name=IPPO", "algorithm.hp={learn_step: 4}",
                              "evolution.hp_config={}"])
    path = make_datapath(ippo.algorithm.name, ippo.training, ippo.replay)
    assert isinstance(path, OnPolicyPath) and path.resyncs_fragments
    assert path.collect_steps(MemberState(0, 100, {"learn_step": 4})) == 4


def test_the_scheduling_parts_import_no_ray() -> None:
    import subprocess
    import sys

    code = ("import sys, distmarl.runtime.logic.scheduler, distmarl.runtime.logic.datapath, "
            "distmarl.runtime.logic.run_state; print(sorted({'ray', 'mlflow'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_member_knows_whether_its_published_weights_are_its_latest() -> None:
    """Published weights stay the learner's latest until it learns without publishing (or a
    train call fails part-way); a train call that publishes makes them the latest again, and
    one that learned nothing changes nothing."""
    sched, state = make(off(chunk=8), learn_step=1)
    m = state.members[0]
    assert not m.published_latest  # nothing published yet
    m.set_weights(1, ["w1"])
    assert m.published_latest
    m.owed = 8.0
    train = next(c for c in sched.next_calls() if c.kind == "train")
    sched.on_result(train, Trained(0, None))
    assert m.published_latest  # learned nothing
    m.owed = 8.0
    train = next(c for c in sched.next_calls() if c.kind == "train")
    sched.on_result(train, Trained(8, None))
    assert not m.published_latest and m.version == 1
    m.owed = 8.0
    train = next(c for c in sched.next_calls() if c.kind == "train")
    sched.on_result(train, Trained(8, (2, ["w2"])))
    assert m.published_latest and (m.version, m.weights_box) == (2, ["w2"])
    m.owed = 8.0
    train = next(c for c in sched.next_calls() if c.kind == "train")
    sched.on_failure(train)
    assert not m.published_latest
