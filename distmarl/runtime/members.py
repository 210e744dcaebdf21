"""The coordinator's bookkeeping per population member (plain data, no Ray calls)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: phases of a member inside a generation
RUN, WAIT, DONE = "run", "wait", "done"


@dataclass
class MemberState:
    """Counters of one slot. ``env_steps`` only move forward; ``owed`` are updates earned by
    new transitions and not yet requested: off-policy, one per ``learn_step`` transitions
    (AgileRL's count); on-policy, one per rollout fragment that reached the buffer."""

    slot: int
    boundary: int
    hp: dict[str, Any]
    env_steps: int = 0
    scheduled_steps: int = 0  # env_steps plus those of collect calls in flight
    owed: float = 0.0
    updates: int = 0
    requested: int = 0  # updates of the train call in flight
    version: int = 0
    weights_box: list[Any] | None = None
    phase: str = RUN
    fitness: list[float] = field(default_factory=list)
    scores: deque = field(default_factory=lambda: deque(maxlen=100))
    episodes: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    train_seconds: float = 0.0
    collect_seconds: float = 0.0
    refused_chunks: int = 0
    max_lag_seen: int = 0  # most weight versions a finished chunk lagged behind the learner
    evaluated_at: int = -1  # the boundary of the last evaluation (its generation is done)
    state_ref: Any = None  # the learner's last full state, owned by the coordinator
    train_calls: int = 0
    learner_incarnation: str | None = None

    @property
    def learn_step(self) -> float:
        return float(self.hp.get("learn_step", 1))

    def accrue(self, new_steps: int, learning_from: int) -> None:
        """Earn updates for the part of ``new_steps`` that lies past ``learning_from``."""
        before = self.env_steps - new_steps
        counted = self.env_steps - max(before, learning_from)
        if counted > 0:
            self.owed += counted / self.learn_step

    def mean_score(self) -> float | None:
        return float(sum(self.scores) / len(self.scores)) if self.scores else None

    def to_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "boundary": self.boundary, "hp": dict(self.hp),
                "env_steps": self.env_steps, "owed": self.owed, "updates": self.updates,
                "fitness": list(self.fitness), "scores": list(self.scores),
                "episodes": self.episodes, "evaluated_at": self.evaluated_at}

    @staticmethod
    def from_json(d: dict[str, Any]) -> MemberState:
        m = MemberState(slot=d["slot"], boundary=d["boundary"], hp=dict(d["hp"]),
                        env_steps=d["env_steps"], owed=d["owed"], updates=d["updates"],
                        fitness=list(d["fitness"]), episodes=d["episodes"],
                        evaluated_at=d.get("evaluated_at", -1))
        m.scheduled_steps = m.env_steps
        m.scores.extend(d["scores"])
        return m
