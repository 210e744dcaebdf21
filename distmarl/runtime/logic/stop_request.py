"""The coordinator's stop flag: set from another thread (the driver asking the run to stop, a
signal on the driver, a planned stop), read by the run's loop at its next turn."""

from __future__ import annotations

import threading


class StopRequest(threading.Event):
    """The coordinator's stop flag (set from another of its threads). ``reason`` becomes the
    summary's ``stop_reason``; ``interrupted`` (a signal, not a planned stop) skips the final
    evaluation and the elite model and closes the tracking runs as ``KILLED``."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "stopped"
        self.interrupted = False

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
