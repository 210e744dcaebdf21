"""The coordinator's on-policy scheduling without Ray: fake actors finish their calls in random
order; every fragment is learned once, with a policy lag of at most ``workers_per_member``."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config
from distmarl.runtime import coordinator as coordinator_module
from distmarl.runtime.coordinator import Coordinator
from distmarl.runtime.learner_actor import TrainResult
from distmarl.runtime.members import MemberState
from distmarl.runtime.rollout_actor import CollectResult

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"


class Call:
    """A fake ``ObjectRef``: its result is computed when the test lets the call finish."""

    def __init__(self, finish) -> None:
        self.finish = finish


class Method:
    def __init__(self, fn) -> None:
        self.remote = fn


class FakeMember:
    """A member's workers and learner around one FIFO of fragments (the buffer's member rows):
    a fragment is ``(its number, the member's updates its policy had)``."""

    def __init__(self, coord: Coordinator, slot: int, workers: int) -> None:
        self.buffer: deque[tuple[int, int]] = deque()
        self.updates = 0  # the learner's
        self.lags: list[int] = []
        self.learned: list[int] = []
        self.written = 0
        self.coord, self.slot = coord, slot
        self.workers = [type("W", (), {"collect": Method(self._collect(w))})()
                        for w in range(workers)]
        self.learner = type("L", (), {"train": Method(self._train),
                                      "get_state": Method(lambda: None)})()

    def _collect(self, w: int):
        def start(steps: int, version: int, box) -> Call:
            policy = version  # the weights it acts with: the learner's after `version` updates

            def finish() -> CollectResult:
                self.buffer.append((self.written, policy))
                self.written += 1
                return CollectResult(steps * 2, [], [], version, 0.0, 0)
            return Call(finish)
        return start

    def _train(self, k: int) -> Call:
        def finish() -> TrainResult:
            n = 0
            while self.buffer and n < k:
                number, policy = self.buffer.popleft()
                self.lags.append(self.updates - policy)
                self.learned.append(number)
                self.updates += 1
                n += 1
            return TrainResult(n, {}, 0.0, (self.updates, [None]) if n else None, "x")
        return Call(finish)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_fragments_are_learned_once_with_bounded_lag(workers, monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module.ray, "get", lambda call: call.finish())
    cfg = load_config(TINY, ["algorithm.name=IPPO", "algorithm.hp={learn_step: 4}",
                             "evolution.hp_config={}", f"population.workers_per_member={workers}"])
    coord = Coordinator(json.loads(cfg.model_dump_json()), "unused")
    coord.on_policy = True
    fakes = [FakeMember(coord, slot, workers) for slot in range(2)]
    coord.workers = [f.workers for f in fakes]
    coord.learners = [f.learner for f in fakes]
    coord.members = [MemberState(slot, boundary=2_000, hp={"learn_step": 4}) for slot in range(2)]
    for m in coord.members:
        m.learner_incarnation = "x"
    rng = np.random.default_rng(workers)
    for _ in range(5_000):
        coord._schedule()
        if not coord._inflight:
            break
        calls = list(coord._inflight)
        coord._handle(calls[rng.integers(len(calls))])  # any call may finish next
    assert not coord._inflight
    for fake, m in zip(fakes, coord.members):
        assert m.env_steps >= 2_000 and m.owed == 0 and not fake.buffer
        assert sorted(fake.learned) == list(range(fake.written))  # each fragment once
        assert m.updates == fake.written
        assert max(fake.lags) <= workers, fake.lags
        if workers == 1:  # collected while the previous fragment was learned, no later
            assert set(fake.lags) <= {0, 1}
