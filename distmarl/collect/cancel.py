"""A stop that plays look at between env steps, so a run stops in seconds whatever it plays.

An evaluation or a set of league games may run for minutes (long episodes, many of them); a
run asked to stop (SIGTERM, with 30 s before SIGKILL under Kubernetes or Slurm) must not wait
for it. Every play loop (:func:`~distmarl.collect.evaluation.episode_outcomes`, on which
evaluations, league games and final games all run) takes a :class:`Cancel` and asks it before
each vector step; once it is set, the loop raises :class:`Cancelled`: what was played is no
result, and the caller ends as stopped instead of recording it.

Where the play runs decides the token: in the coordinator's process it is the run's stop
request itself; in a Ray actor, Ray's own flag for a task the coordinator cancelled
(:class:`~distmarl.runtime.actors.cancel.RayTaskCancel`); elsewhere (``distmarl evaluate``,
``play``, tests) :data:`NEVER`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NEVER", "Cancel", "Cancelled", "NeverCancel", "check"]


class Cancel(Protocol):
    """A stop to look at (a :class:`threading.Event` is one)."""

    def is_set(self) -> bool:
        """Whether the play should stop now."""


class NeverCancel:
    """The no-op token: plays always run to their end."""

    def is_set(self) -> bool:
        return False


#: the token of plays nothing stops
NEVER = NeverCancel()


class Cancelled(Exception):
    """A play stopped part-way by its :class:`Cancel`: its episodes or games are no result."""


def check(cancel: Cancel) -> None:
    """Raise :class:`Cancelled` once ``cancel`` is set."""
    if cancel.is_set():
        raise Cancelled("stopped part-way: the episodes played so far are no result")
