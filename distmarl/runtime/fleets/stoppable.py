"""Waiting on a Ray fleet's evaluations and games with the run's stop in view.

An evaluation or a set of league games may run for minutes; a run asked to stop must not wait
for it. :func:`wait_unless_stopped` waits for the calls, looking at the stop request every
:data:`STOP_POLL_S`; once it is set, it cancels every call still running (Ray sets the flag
the worker's play reads between env steps:
:class:`~distmarl.runtime.actors.cancel.RayTaskCancel`; a call still queued is dropped) and
raises :class:`~distmarl.collect.cancel.Cancelled`: the games are no result.

Ray may drop a cancel: one that reaches a threaded actor (a concurrency group, as a host's
workers have) as a call is about to start sets no flag, and the call, once started, plays on;
an endless one would keep its thread (and every call queued behind it) forever. So the calls
still running are cancelled again every :data:`CANCEL_RESEND_S` until they end: a later
cancel finds the call running and sets its flag. And the first look at the stop comes a poll
after the calls were made: a cancel sent while a call is still on its way to its actor may
hold up the actor's later calls (the checkpoint's among them) for half a minute.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import ray

from distmarl.collect.cancel import Cancel, Cancelled

__all__ = ["CANCEL_RESEND_S", "CANCEL_WAIT_S", "STOP_POLL_S", "wait_unless_stopped"]

#: seconds between looks at the stop request while calls run
STOP_POLL_S = 0.25
#: seconds a cancelled call gets to end (it stops within an env step)
CANCEL_WAIT_S = 10.0
#: seconds between the cancels of a cancelled call still running (Ray may drop one)
CANCEL_RESEND_S = 0.5


def wait_unless_stopped(refs: Sequence[Any], stop: Cancel) -> None:
    """Return once every call of ``refs`` has ended (well or not: the caller reads them);
    when ``stop`` is set first, cancel those still running and raise
    :class:`~distmarl.collect.cancel.Cancelled` once they have ended (up to
    :data:`CANCEL_WAIT_S`), so the workers are idle when the run writes its checkpoint."""
    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=STOP_POLL_S)
        if pending and stop.is_set():
            _cancel(pending)
            raise Cancelled(f"stopped with {len(pending)} of {len(refs)} calls in flight")


def _cancel(refs: Sequence[Any]) -> None:
    """Cancel ``refs`` and wait for them to end (up to :data:`CANCEL_WAIT_S`), cancelling
    those still running again every :data:`CANCEL_RESEND_S`; their outcomes (the worker's
    :class:`~distmarl.collect.cancel.Cancelled`, Ray's ``TaskCancelledError``) are read and
    dropped, so Ray does not report them as unhandled errors."""
    deadline = time.monotonic() + CANCEL_WAIT_S
    pending = list(refs)
    while pending and (left := deadline - time.monotonic()) > 0:
        for ref in pending:
            ray.cancel(ref, recursive=False)
        _, pending = ray.wait(pending, num_returns=len(pending),
                              timeout=min(CANCEL_RESEND_S, left))
    ended = [ref for ref in refs if ref not in pending]
    for ref in ended:
        with contextlib.suppress(Exception):
            ray.get(ref)
