"""The update-to-data rule where the data is: each member's updates earned by the env steps its
workers store, granted to its learner's reads.

A run's learners pull: each asks the buffer for batches whenever it is free, and the buffer
grants a member's learner as many as the member's data has earned and not yet been granted
(:class:`UpdateGrants`). The rule itself is :class:`~distmarl.config.replay.UpdateRule`: the
env steps past ``learning_delay`` of a store that leaves ``learning_starts`` rows or more
count, one update per ``learn_step`` of them. Steps are turned into updates at the
``learn_step`` the learner reads with (:class:`~distmarl.types.Pace`), so a mutation of it
applies to the steps stored from then on (a member evolves with every update of its data
done). Writers wait while a member's learner owes more than ``max_owed`` updates: the learner
never falls further behind its data, and a chunk's policy lags its learner's newest by about
``max_owed`` updates' versions at most. A learner is never ahead of its data: it is granted
only what was earned.

The reference trainer counts with the same object (one member, one reader). Plain numbers;
:meth:`UpdateGrants.state_dict` goes into the buffer's checkpoints and snapshots.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from distmarl.config.replay import UpdateRule
from distmarl.types import Pace


@dataclass
class Account:
    """One member's counts: its env ``steps`` stored, those that ``counted`` under the rule,
    the counted steps already turned into updates (``converted``), the updates ``earned``
    (fractions carry over) and ``granted``, and the ``learn_step`` its learner last read
    with (None before its first read)."""

    steps: int = 0
    counted: int = 0
    converted: int = 0
    earned: float = 0.0
    granted: int = 0
    learn_step: float | None = None


class UpdateGrants:
    """Each member's :class:`Account` under ``rule``; writers of a member wait while its
    learner owes more than ``max_owed`` updates (None: never)."""

    def __init__(self, rule: UpdateRule, max_owed: int | None = None) -> None:
        if max_owed is not None and max_owed < 0:
            raise ValueError(f"max_owed must be 0 or more, got {max_owed}")
        self.rule, self.max_owed = rule, max_owed
        self.accounts: dict[int, Account] = {}

    def inserted(self, member: int, env_steps: int, buffer_rows: int) -> None:
        """``member`` stored rows of ``env_steps`` env steps, leaving ``buffer_rows`` rows
        ever added."""
        a = self._account(member)
        a.steps += env_steps
        a.counted += self.rule.counted(a.steps, env_steps, buffer_rows)

    def may_insert(self, member: int) -> bool:
        """Whether ``member``'s writers may store now (its learner owes at most ``max_owed``
        updates; before its first read, each counted step as one)."""
        if self.max_owed is None:
            return True
        a = self._account(member)
        pending = (a.counted - a.converted) / (a.learn_step or 1.0)
        return a.earned + pending - a.granted <= self.max_owed

    def owed(self, pace: Pace) -> int:
        """Whole updates ``pace``'s member has earned and not been granted, its steps turned
        into updates at ``pace.learn_step``."""
        a = self._account(pace.member)
        a.learn_step = pace.learn_step
        a.earned += (a.counted - a.converted) / pace.learn_step
        a.converted = a.counted
        return max(0, math.floor(a.earned + 1e-9) - a.granted)

    def grant(self, member: int, updates: int) -> None:
        """``updates`` batches were read for ``member``'s learner (at most :meth:`owed`)."""
        self._account(member).granted += updates

    def _account(self, member: int) -> Account:
        return self.accounts.setdefault(int(member), Account())

    def state_dict(self) -> dict[str, Any]:
        return {str(m): asdict(a) for m, a in self.accounts.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.accounts = {int(m): Account(**a) for m, a in state.items()}
