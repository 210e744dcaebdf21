"""What the reference trainer hands back (plain figures and the trained algorithm), and what
its loop keeps on the way."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distmarl.algorithms.base import Acting, Algorithm
from distmarl.collect import progress_score


@dataclass
class ReferenceResult:
    """One member trained in one process.

    ``history``: ``[(env_steps, mean evaluation score)]``, one entry per evaluation (none when
    evaluation was off). ``train_scores``: ``[(env_steps, mean score of the training episodes
    that ended in that collection)]``. Env steps count transitions of one agent: vectorised
    steps * ``num_envs``. ``last_metrics`` are the last ``learn`` call's metrics (empty before
    the first update). ``algo`` is the trained member, ready for ``act`` or ``state_dict``.
    """

    env_steps: int
    updates: int
    wall_seconds: float
    learn_seconds: float
    algo: Algorithm
    history: list[tuple[int, float]] = field(default_factory=list)
    train_scores: list[tuple[int, float]] = field(default_factory=list)
    last_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def env_steps_per_s(self) -> float:
        """Env steps over the whole wall time, learning and evaluation included."""
        return self.env_steps / self.wall_seconds if self.wall_seconds > 0 else 0.0


class Progress:
    """What a reference trainer's loop keeps as it goes (the scores of training episodes and
    evaluations, updates, time spent learning, the last metrics), and the result it makes of
    it. Evaluation, without exploration, is due every ``eval_every`` env steps (0: never)."""

    def __init__(self, eval_every: int) -> None:
        self.eval_every, self.next_eval = eval_every, eval_every
        self.history: list[tuple[int, float]] = []
        self.train_scores: list[tuple[int, float]] = []
        self.metrics: dict[str, float] = {}
        self.updates = 0
        self.learn_seconds = 0.0
        self.start = time.perf_counter()

    def collected(self, done: int, episode_scores: Sequence[float]) -> None:
        """A collection that took the run to ``done`` env steps ended these episodes."""
        if episode_scores:
            self.train_scores.append((done, float(np.mean(episode_scores))))

    def evaluate_if_due(self, done: int, eval_venv: Any, algo: Acting, seed: int
                        ) -> float | None:
        """The member's evaluation score at ``done`` env steps when one is due, else None."""
        if not self.eval_every or done < self.next_eval:
            return None
        score = progress_score(eval_venv, algo, seed, done)
        self.history.append((done, score))
        self.next_eval += self.eval_every
        return score

    def rate(self, done: int) -> float:
        """Env steps per second so far."""
        return done / (time.perf_counter() - self.start)

    def result(self, done: int, algo: Algorithm) -> ReferenceResult:
        return ReferenceResult(env_steps=done, updates=self.updates,
                               wall_seconds=time.perf_counter() - self.start,
                               learn_seconds=self.learn_seconds, algo=algo,
                               history=self.history, train_scores=self.train_scores,
                               last_metrics=self.metrics)
