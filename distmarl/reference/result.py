"""What the reference trainer hands back: plain figures and the trained algorithm."""

from __future__ import annotations

from dataclasses import dataclass, field

from distmarl.algorithms.base import Algorithm


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
