"""Where a run's time goes: ledgers, the shares of each kind of actor, the last lines."""

from __future__ import annotations

import pytest

from distmarl.runtime.logic.time_spent import (
    CALL,
    UPDATING,
    WAITING_DATA,
    Ledger,
    TimeSpent,
    bottleneck,
    time_line,
    time_metrics,
    time_shares,
)


class Clock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_ledger_counts_nested_blocks_from_its_start() -> None:
    clock = Clock()
    ledger = Ledger("learner", clock)
    clock.now = 5.0  # setting up: not counted once training starts
    ledger.start()
    with ledger.spend(CALL):
        with ledger.spend(WAITING_DATA):
            clock.now += 1.0
        with ledger.spend(UPDATING):
            clock.now += 2.0
    clock.now += 7.0  # between calls
    spent = ledger.read()
    assert spent == TimeSpent("learner", 10.0, {WAITING_DATA: 1.0, UPDATING: 2.0, CALL: 3.0})


def test_a_block_that_raises_still_counts() -> None:
    clock = Clock()
    ledger = Ledger("rollout", clock)
    with pytest.raises(RuntimeError), ledger.spend(CALL):
        clock.now += 2.0
        raise RuntimeError("env failed")
    assert ledger.read().seconds == {CALL: 2.0}


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'learners'"):
        Ledger("learners")


def test_shares_sum_each_kind_over_its_actors() -> None:
    """Two learner groups of 10 s each: 6 s in calls of which 2 s waiting for samples and 3 s
    updating, and 4 s in calls with nothing to wait for."""
    ledgers = [TimeSpent("learner", 10.0, {CALL: 6.0, WAITING_DATA: 2.0, UPDATING: 3.0}),
               TimeSpent("learner", 10.0, {CALL: 4.0, UPDATING: 4.0}),
               TimeSpent("rollout", 10.0, {CALL: 9.0, WAITING_DATA: 1.0}),
               TimeSpent("buffer", 10.0, {CALL: 2.5}),
               TimeSpent("coordinator", 10.0, {})]
    shares = time_shares(ledgers)
    assert shares["learner"] == pytest.approx({"busy": 0.4, WAITING_DATA: 0.1,
                                               "waiting_coordinator": 0.5, UPDATING: 0.35})
    assert shares["rollout"] == pytest.approx({"busy": 0.8, WAITING_DATA: 0.1,
                                               "waiting_coordinator": 0.1})
    assert shares["buffer"] == pytest.approx({"busy": 0.25})
    assert shares["coordinator"] == {"busy": 0.0}
    assert time_metrics(shares)["time/learner/waiting_coordinator"] == pytest.approx(0.5)
    assert time_shares([TimeSpent("buffer", 0.0, {})]) == {}


def test_the_bottleneck_is_the_largest_wait() -> None:
    shares = {"learner": {"busy": 0.3, WAITING_DATA: 0.41, "waiting_coordinator": 0.29,
                          UPDATING: 0.2},
              "rollout": {"busy": 0.6, WAITING_DATA: 0.05, "waiting_coordinator": 0.35},
              "buffer": {"busy": 0.9}}
    assert bottleneck(shares) == "learners waited 41% of the time for samples"
    shares["rollout"]["waiting_coordinator"] = 0.5
    assert bottleneck(shares) == "rollout workers waited 50% of the time for the coordinator"
    calm = {"learner": {"busy": 0.7, WAITING_DATA: 0.03, "waiting_coordinator": 0.02,
                        UPDATING: 0.6}, "rollout": {"busy": 0.7, WAITING_DATA: 0.05,
                                                    "waiting_coordinator": 0.05}}
    assert bottleneck(calm).startswith("no learner or rollout worker waited 10%")
    busy = {**shares, "learner": {"busy": 0.86, WAITING_DATA: 0.08,
                                  "waiting_coordinator": 0.06, UPDATING: 0.84}}
    assert bottleneck(busy) == "learners were busy 86% of the time: they hold the run back"
    assert time_line(shares) == (
        "learners busy 30% (updating 20%), waiting for samples 41%, for the coordinator 29%; "
        "rollout workers busy 60%, waiting for the buffer 5%, for the coordinator 50%; "
        "the buffer busy 90%")
