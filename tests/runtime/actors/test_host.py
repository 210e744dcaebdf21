"""A learner process learns on its own: its rounds run in a thread of their own, paced by what
the buffer grants, beside its calls; it says what it learned in reports, settles a member at
its boundary, and stops (here in this process: the plain class behind the actor)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from distmarl.runtime.actors.clients import LocalBuffer
from distmarl.runtime.actors.host import HostShell
from distmarl.runtime.coordinator.run import fleet_spec
from tests.runtime.actors.test_group import config, filled_run


def test_a_host_learns_what_is_granted_reports_it_and_settles(tmp_path: Path) -> None:
    run = filled_run(tmp_path, "run", "MADDPG")  # 3 members' chunks stored, none learned
    try:
        spec = fleet_spec(config(tmp_path, "MADDPG"), run.fleet.learners[0].spaces, None)
        client = LocalBuffer(run.fleet.shards[0])
        host = HostShell([spec.learner_kwargs(m, [client], run.fleet.store) for m in (0, 1)])
        owed = {m: run.fleet.shards[0].grants.owed(host.learners[m].sample_request(0).pace)
                for m in (0, 1)}
        assert min(owed.values()) > 0
        host.start_learning()
        said: dict[int, int] = {0: 0, 1: 0}
        deadline = time.monotonic() + 60
        while said != owed and time.monotonic() < deadline:
            for m, r in host.report(wait_s=1.0).items():
                said[m] += r.updates
        assert said == owed  # everything granted, nothing more: the data paces it
        assert host.report(wait_s=0.2) == {}
        version = host.learner(0, "publish").version  # a call, between two rounds
        # a new chunk of member 0: it learns what it earns, then settles and publishes
        worker = run.fleet.workers[0][0]
        worker.collect(8, version, None)
        settled = host.settle([0])
        assert settled[0].weights is not None and settled[0].weights[0] > version
        learned = settled[0].updates + sum(r.updates for r in host.stop_learning().values())
        assert learned == 2  # 8 steps x 2 envs, at learn_step 8
        assert host.learners[0].updates == owed[0] + learned
        ledger = host.time_spent()[0]
        assert ledger.kind == "learner" and ledger.seconds["updating"] > 0
    finally:
        run.fleet.close()


def test_a_failure_of_the_rounds_is_raised_by_the_next_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = filled_run(tmp_path, "run", "MADDPG")
    try:
        spec = fleet_spec(config(tmp_path, "MADDPG"), run.fleet.learners[0].spaces, None)
        host = HostShell([spec.learner_kwargs(0, [LocalBuffer(run.fleet.shards[0])],
                                              run.fleet.store)])

        def broken(*args: object) -> None:
            raise RuntimeError("a bug in the update")

        monkeypatch.setattr(host.group, "_replay", broken)
        host.start_learning()
        with pytest.raises(RuntimeError, match="a bug in the update"):
            host.report(wait_s=30)
    finally:
        run.fleet.close()
