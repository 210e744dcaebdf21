"""Processes that carry out a run's calls in a process group of their own.

A local Ray started by the driver, or the in-process fleet's env worker processes, share the
driver's process group unless told otherwise, so a signal sent to the whole group (``timeout``,
a terminal's Ctrl-C, ``kill -TERM -PGID``) would reach them too, and they would exit before the
run can save anything. :func:`own_process_group` starts them in a process group of their own;
they still end with the driver.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

#: the holder of :func:`own_process_group`: leads a new group, says so, waits for stdin to close
_HOLDER = "import os, sys; os.setpgid(0, 0); print('ready', flush=True); sys.stdin.read()"


@contextlib.contextmanager
def own_process_group(enabled: bool = True) -> Iterator[int | None]:
    """Within this block the driver belongs to a new process group, so the processes it starts
    (a local Ray's) are in it; on leaving, the driver goes back to its own group and they stay.
    A signal sent to the driver's group then reaches the driver alone. Yields the new group's
    id (None where nothing changed).

    The new group is led by a short-lived holder process: the driver may lead its own group
    (a shell's job), and a leader can join another group but cannot start a second one. Nothing
    changes where the driver cannot move (a session leader: PID 1 in a container) or
    ``enabled`` is False. A driver whose group is gone when it leaves (it was the group's last
    member: started as ``(cmd &)`` by a shell that has exited) leads a new group of its own."""
    if not enabled or sys.platform == "win32":
        yield None
        return
    before = os.getpgrp()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        holder.stdout.readline()  # its group exists
        try:
            os.setpgid(0, holder.pid)
        except OSError:  # a session leader cannot leave its group
            yield None
            return
        try:
            yield holder.pid
        finally:
            _rejoin(before)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def _rejoin(group: int) -> None:
    """Move back to ``group``; where it no longer exists (no member left in it, and it is not
    this process's own number), lead a new group instead."""
    try:
        os.setpgid(0, group)  # the driver's own number: its group anew if it was alone
    except PermissionError:
        os.setpgid(0, 0)
