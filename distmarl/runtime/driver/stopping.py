"""Stopping a run from outside: ``SIGINT`` (Ctrl-C) and ``SIGTERM`` (``timeout``, Docker,
Kubernetes, ``ray job stop``) on the driver, which asks the coordinator to stop
(:class:`~distmarl.runtime.logic.stop_request.StopRequest`).

The driver (:func:`~distmarl.runtime.driver.trainer.train`) holds :class:`StopSignals` while a run is
on. The first signal is only noted; the driver then asks the coordinator to stop, which sets its
:class:`StopRequest`: the loop ends at its next turn, the calls in flight finish, a checkpoint is
written and the tracking runs close as ``KILLED``. A second signal exits at once, with no
checkpoint, taking a local Ray's processes with it. The exit code is a shell's for a process
ended by that signal: ``128 + signum`` (130 for ``SIGINT``, 143 for ``SIGTERM``).

A process started with SIGINT ignored (``cmd &`` in a script, ``nohup cmd &``: a shell's
background job ignores it) keeps ignoring it, as whoever started it asked; SIGTERM still stops
it. The handlers put back on exit are whatever the process had before.

A local Ray started by the driver runs in a process group of its own
(:func:`~distmarl.runtime.fleets.process_group.own_process_group`), so a signal sent to the
driver's whole group reaches the driver alone and the run can save before Ray's workers end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

#: the signals that stop a run
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: the stop signals left alone where the process started with them ignored: a shell starts a
#: background job (``cmd &``, ``nohup cmd &`` in a script) with SIGINT ignored so that a Ctrl-C
#: meant for the foreground does not reach it
KEPT_IGNORED = (signal.SIGINT,)
#: a repeat of the first stop signal this soon after it is the same stop sent twice at once
#: (``timeout`` signals the process, then its process group), not a second request
SAME_STOP_S = 0.25


def exit_code(signum: int) -> int:
    """A shell's exit status of a process ended by ``signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum)


def stop_reason(signum: int) -> str:
    """The summary's ``stop_reason`` of a run stopped by ``signum``: ``"stopped by SIGTERM"``."""
    return f"stopped by {signal.Signals(signum).name}"


class StopSignals:
    """While installed (a ``with`` block, main thread only), SIGINT and SIGTERM are caught:
    the first one's number goes to :attr:`received` and a line to stderr; a second one exits
    the process at once with :func:`exit_code`. The previous handlers come back on exit. A
    signal of :data:`KEPT_IGNORED` that is ignored when first installed stays ignored.

    The signals are never blocked: a blocked signal is inherited by every process started
    meanwhile (Ray's raylet and GCS, and through them its workers), which then ignore the
    SIGTERM that ends them. A signal that lands on another thread (Ray's, torch's) is still
    handled on the main thread, once it next runs Python code: the driver's wait loop
    returns to Python every fraction of a second.

    One stop may arrive as several signals at once: ``timeout`` sends its signal to the
    process and then to its whole process group, which holds the process too. Python calls a
    handler once for any number of one signal that came before it could run, and a repeat of
    the first signal within :data:`SAME_STOP_S` of it is taken as the same stop; a second
    signal counts from then on (a user's second Ctrl-C)."""

    def __init__(self) -> None:
        #: the first signal caught, or None
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._first_at = 0.0  # when the first signal was handled (time.monotonic)
        #: a process group to kill with the driver on a second signal (a local Ray's, from
        #: :func:`own_process_group`): Ray's agents would otherwise outlive it for a minute
        self.group: int | None = None

    @staticmethod
    def _main() -> bool:
        return threading.current_thread() is threading.main_thread()

    def install(self) -> None:
        """Catch the stop signals (again: ``ray.init`` replaces the SIGTERM handler). Off the
        main thread Python cannot, and the signals keep their handlers."""
        if not self._main():
            return
        for signum in STOP_SIGNALS:
            if signum not in self._previous and self._left_ignored(signum):
                continue
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    @staticmethod
    def _left_ignored(signum: int) -> bool:
        """Whether ``signum`` is one of :data:`KEPT_IGNORED` and ignored now (not yet caught
        here: the check is the process's own setting)."""
        return signum in KEPT_IGNORED and signal.getsignal(signum) is signal.SIG_IGN

    def restore(self) -> None:
        """Give the signals back their handlers from before."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    @property
    def reason(self) -> str | None:
        """:func:`stop_reason` of the signal received, or None."""
        return None if self.received is None else stop_reason(self.received)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:
            if signum == self.received and time.monotonic() - self._first_at < SAME_STOP_S:
                return  # the same stop, delivered twice at once
            _say(f"\ndistmarl: {name} again: exiting now, without a checkpoint\n")
            if self.group is not None:
                with contextlib.suppress(OSError):
                    os.killpg(self.group, signal.SIGKILL)
            os._exit(exit_code(signum))
        self.received, self._first_at = signum, time.monotonic()
        _say(f"\ndistmarl: {name}: stopping after the calls in flight, then writing a "
             f"checkpoint (send it again to exit at once)\n")


def _say(text: str) -> None:
    """Write to stderr from a signal handler (no buffered stream: it may be mid-write)."""
    with contextlib.suppress(OSError):
        os.write(sys.stderr.fileno(), text.encode())
