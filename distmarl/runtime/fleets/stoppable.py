"""Waiting on a Ray fleet's evaluations and games with the run's stop in view.

An evaluation or a set of league games may run for minutes; a run asked to stop must not wait
for it. :func:`wait_unless_stopped` waits for the calls, looking at the stop request every
:data:`STOP_POLL_S`; once it is set, it cancels every call still running (Ray sets the flag
the worker's play reads between env steps:
:class:`~distmarl.runtime.actors.cancel.RayTaskCancel`; a call still queued is dropped) and
raises :class:`~distmarl.collect.cancel.Cancelled`: the games are no result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import ray

from distmarl.collect.cancel import Cancel, Cancelled

__all__ = ["CANCEL_WAIT_S", "STOP_POLL_S", "wait_unless_stopped"]

#: seconds between looks at the stop request while calls run
STOP_POLL_S = 0.25
#: seconds a cancelled call gets to end (it stops within an env step)
CANCEL_WAIT_S = 10.0


def wait_unless_stopped(refs: Sequence[Any], stop: Cancel) -> None:
    """Return once every call of ``refs`` has ended (well or not: the caller reads them);
    when ``stop`` is set first, cancel those still running and raise
    :class:`~distmarl.collect.cancel.Cancelled` once they have ended (up to
    :data:`CANCEL_WAIT_S`), so the workers are idle when the run writes its checkpoint."""
    pending = list(refs)
    while pending:
        if stop.is_set():
            _cancel(pending)
            raise Cancelled(f"stopped with {len(pending)} of {len(refs)} calls in flight")
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=STOP_POLL_S)


def _cancel(refs: Sequence[Any]) -> None:
    """Cancel ``refs`` and wait for them to end; their outcomes (the worker's
    :class:`~distmarl.collect.cancel.Cancelled`, Ray's ``TaskCancelledError``) are read and
    dropped, so Ray does not report them as unhandled errors."""
    for ref in refs:
        ray.cancel(ref, recursive=False)
    ended, _ = ray.wait(list(refs), num_returns=len(refs), timeout=CANCEL_WAIT_S)
    for ref in ended:
        with contextlib.suppress(Exception):
            ray.get(ref)
