"""The run's counters round-trip through a checkpoint's JSON; checkpoints that name a member
``slot`` still load."""

from __future__ import annotations

import json

from distmarl.runtime.logic.run_state import RUN, MemberState, RunState


def test_run_state_round_trips_through_json() -> None:
    state = RunState()
    state.members = [MemberState(i, 200, {"lr": 0.1 * (i + 1), "learn_step": 2})
                     for i in range(2)]
    m = state.members[1]
    m.env_steps, m.owed, m.updates, m.episodes = 240, 1.5, 119, 3
    m.fitness, m.evaluated_at = [-40.0, -30.5], 200
    m.scores.extend([-1.0, -2.0])
    state.generation, state.evolutions, state.total_env_steps, state.buffer_rows = 2, 5, 480, 480
    state.event(fault="worker restarted", member=1, worker=0)
    state.copy_log.append({"generation": 2, "member": 0, "source": 1})
    state.fitness_history.append([-40.0, -30.5])
    saved = json.loads(json.dumps(state.state_dict()))
    restored = RunState()
    restored.load_state_dict(saved)
    assert restored.state_dict() == state.state_dict()
    r = restored.members[1]
    assert (r.member, r.env_steps, r.scheduled_steps, r.owed, r.phase) == (1, 240, 240, 1.5, RUN)
    assert list(r.scores) == [-1.0, -2.0] and r.mean_score() == -1.5
    assert restored.best_fitness() == -30.5 and restored.member_step() == 120
    assert restored.events == [{"generation": 2, "fault": "worker restarted", "member": 1,
                                "worker": 0}]


def test_a_member_saved_as_slot_loads() -> None:
    saved = {"slot": 3, "boundary": 100, "hp": {"lr": 0.01}, "env_steps": 64, "owed": 0.0,
             "updates": 8, "fitness": [1.0], "scores": [2.0], "episodes": 1}
    m = MemberState.from_json(saved)
    assert m.member == 3 and m.evaluated_at == -1 and m.to_json()["member"] == 3
    assert "slot" not in m.to_json()
