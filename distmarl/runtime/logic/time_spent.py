"""Where a run's time goes: each actor's ledger of seconds, and the shares of each kind.

Every actor keeps a :class:`Ledger` from the start of training: the seconds it spent in the
calls it answered (``call``), and within them the seconds it waited on the data plane
(``waiting_data``: a learner for its samples or fragments, a rollout worker for the buffer to
take its chunk) and, for learners, the seconds it spent updating (``updating``). What is not
in a call is time it waited for the coordinator to call it. A ledger crosses processes as
:class:`TimeSpent` (plain data); :func:`time_shares` sums the ledgers of each kind of actor and
divides by their wall time:

=============================  ==============================================================
share                          seconds
=============================  ==============================================================
``busy``                       in calls, less waiting for data
``updating`` (learners)        in update steps (part of ``busy``)
``waiting_data``               waiting for samples (learners) or for the buffer (workers)
``waiting_coordinator``        between calls
=============================  ==============================================================

The buffer's and the coordinator's own time is ``busy`` alone (the coordinator's: planning,
evolution, records; the rest it waits for its actors). In one process one thing runs at a
time, so there every kind waits while the others run.

Pure code: no Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

#: kinds of actors, as the summary names them
KINDS = ("learner", "rollout", "buffer", "coordinator")
#: what a ledger counts (``call`` holds the other two)
CALL, WAITING_DATA, UPDATING = "call", "waiting_data", "updating"
#: how the last line names each kind and what it waits for
NOUNS = {"learner": "learners", "rollout": "rollout workers", "buffer": "the buffer",
         "coordinator": "the coordinator"}
DATA = {"learner": "samples", "rollout": "the buffer"}
#: a kind that waited less than this share of the time is no bottleneck
BOTTLENECK_SHARE = 0.10
#: learners or rollout workers busy this share of the time or more hold the run back
BUSY_SHARE = 0.75


class TimeSpent(NamedTuple):
    """One actor's ledger: its ``kind`` (one of :data:`KINDS`), seconds since it started
    counting (``wall``) and seconds of each of :data:`CALL`, :data:`WAITING_DATA` and
    :data:`UPDATING`."""

    kind: str
    wall: float
    seconds: dict[str, float]


class Ledger:
    """Seconds an actor of ``kind`` spends in each kind of work, from construction or the last
    :meth:`start` (``clock``: seconds, monotonic)."""

    def __init__(self, kind: str, clock: Callable[[], float] = time.perf_counter) -> None:
        if kind not in KINDS:
            raise ValueError(f"no kind of actor {kind!r}: one of {KINDS}")
        self.kind, self.clock = kind, clock
        self.started = clock()
        self.seconds: dict[str, float] = {}

    def start(self) -> None:
        """Count from now (training starts: what came before was setting up)."""
        self.started = self.clock()
        self.seconds = {}

    @contextmanager
    def spend(self, what: str) -> Iterator[None]:
        """The block's seconds count as ``what``."""
        began = self.clock()
        try:
            yield
        finally:
            self.add(what, self.clock() - began)

    def add(self, what: str, seconds: float) -> None:
        self.seconds[what] = self.seconds.get(what, 0.0) + seconds

    def read(self) -> TimeSpent:
        return TimeSpent(self.kind, self.clock() - self.started, dict(self.seconds))


def time_shares(ledgers: Sequence[TimeSpent]) -> dict[str, dict[str, float]]:
    """Each kind's shares of its actors' summed wall time (see the module's table); kinds
    without a ledger, or whose ledgers count no time, are left out."""
    out: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        mine = [t for t in ledgers if t.kind == kind]
        wall = sum(t.wall for t in mine)
        if wall <= 0:
            continue
        total = {k: sum(t.seconds.get(k, 0.0) for t in mine) for k in (CALL, WAITING_DATA,
                                                                      UPDATING)}
        call = min(total[CALL], wall)
        shares = {"busy": (call - total[WAITING_DATA]) / wall}
        if kind in DATA:
            shares[WAITING_DATA] = total[WAITING_DATA] / wall
            shares["waiting_coordinator"] = 1.0 - call / wall
        if kind == "learner":
            shares[UPDATING] = total[UPDATING] / wall
        out[kind] = shares
    return out


def time_metrics(shares: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``time/<kind>/<share>`` metric keys of :func:`time_shares`' result."""
    return {f"time/{kind}/{name}": value for kind, parts in shares.items()
            for name, value in parts.items()}


def bottleneck(shares: Mapping[str, Mapping[str, float]]) -> str:
    """What held the run back most, in words: learners or rollout workers busy
    :data:`BUSY_SHARE` of the time or more (the busier: ``"learners were busy 86% of the
    time: they hold the run back"``), else the largest share they waited, for their data or
    for the coordinator (``"learners waited 41% of the time for samples"``); a line saying
    none did where no wait reached :data:`BOTTLENECK_SHARE`."""
    busy = max(((parts["busy"], kind) for kind, parts in shares.items() if kind in DATA),
               default=(0.0, ""))
    if busy[0] >= BUSY_SHARE:
        return f"{NOUNS[busy[1]]} were busy {busy[0]:.0%} of the time: they hold the run back"
    waits = [(parts[name], kind, DATA[kind] if name == WAITING_DATA else NOUNS["coordinator"])
             for kind, parts in shares.items() if kind in DATA
             for name in (WAITING_DATA, "waiting_coordinator")]
    if not waits:
        return "no learner or rollout worker counted its time"
    share, kind, what = max(waits)
    if share < BOTTLENECK_SHARE:
        return (f"no learner or rollout worker waited {BOTTLENECK_SHARE:.0%} of the time or "
                "more")
    return f"{NOUNS[kind]} waited {share:.0%} of the time for {what}"


def time_line(shares: Mapping[str, Mapping[str, float]]) -> str:
    """Each kind's shares in one line (``learners busy 38% (updating 30%), waiting for
    samples 2%, for the coordinator 60%; ...``)."""
    parts = []
    for kind, s in shares.items():
        text = f"{NOUNS[kind]} busy {s['busy']:.0%}"
        if UPDATING in s:
            text += f" (updating {s[UPDATING]:.0%})"
        if kind in DATA:
            text += (f", waiting for {DATA[kind]} {s[WAITING_DATA]:.0%}, for the coordinator "
                     f"{s['waiting_coordinator']:.0%}")
        parts.append(text)
    return "; ".join(parts)
