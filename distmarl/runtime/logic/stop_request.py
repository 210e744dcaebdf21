"""The coordinator's stop flag: set from another thread (the driver asking the run to stop, a
signal on the driver, a planned stop), read by the run's loop at its next turn."""

from __future__ import annotations

import threading

from distmarl.collect.cancel import NEVER, Cancel


class StopRequest(threading.Event):
    """The coordinator's stop flag (set from another of its threads). ``reason`` becomes the
    summary's ``stop_reason``; ``interrupted`` (a signal, not a planned stop) skips the final
    evaluation and the elite model and closes the tracking runs as ``KILLED``, and cuts the
    evaluations and games in flight short (:attr:`interruption`)."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "stopped"
        self.interrupted = False
        #: set once an interrupting stop is requested: what evaluations and games look at
        self.interruption: Cancel = Interruption(self)

    def request(self, reason: str = "stopped", interrupted: bool = False) -> None:
        """Stop at the next turn of the loop; the first request's reason stays."""
        if not self.is_set():
            self.reason, self.interrupted = reason, interrupted
        self.set()


def stop_details(stop: threading.Event) -> tuple[str, bool]:
    """``(reason, interrupted)`` of a set stop flag (a plain ``Event``: a planned stop)."""
    if isinstance(stop, StopRequest):
        return stop.reason, stop.interrupted
    return "stopped", False


class Interruption:
    """A :class:`~distmarl.collect.cancel.Cancel` set once ``request`` is set by an
    interrupting stop (a signal): plays in flight end then, while a planned stop lets them
    finish (and the final evaluation run)."""

    def __init__(self, request: StopRequest) -> None:
        self.request = request

    def is_set(self) -> bool:
        return self.request.is_set() and self.request.interrupted


def interruption(stop: threading.Event) -> Cancel:
    """What cuts ``stop``'s run's plays short: a :class:`StopRequest`'s interruption; a plain
    ``Event`` (a planned stop) never does."""
    if isinstance(stop, StopRequest):
        return stop.interruption
    return NEVER
