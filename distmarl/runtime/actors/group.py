"""Several members' learners in one process, learning together in rounds.

Each member keeps its own :class:`~distmarl.runtime.actors.learner.LearnerShell` (its
algorithm, buffer consumer, fragment reader, counters, published versions). A round
(:meth:`LearnerGroup.pull`) reads each member's next batches (all members' in one buffer
call, each paced: the buffer grants as many as the member's data earned) or fragments, then
updates them together (:mod:`distmarl.algorithms.groups`: the members that share their shapes
as one stacked computation, kept from round to round, any other alone), and finishes each
member's part as its own would (counters, priorities for the next read, publishing).
Off-policy, the members' next batches are then read ahead
(:mod:`~distmarl.runtime.actors.readahead`). A learner process runs rounds for as long as its
members have data (:mod:`~distmarl.runtime.actors.host`); the in-process fleet runs them
after each of its turns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import cast

from distmarl.algorithms.groups import Stacks
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.runtime.actors.learner import LearnerShell, Readout, TrainResult
from distmarl.runtime.actors.readahead import ReadAhead, Reads
from distmarl.runtime.logic.time_spent import CALL, UPDATING, WAITING_DATA, Ledger, TimeSpent

#: batches a member asks for in a round (the buffer grants what its data earned)
ROUND_UPDATES = 32


class LearnerGroup:
    """The learners of ``shells``' members (one family), addressed by member; off-policy,
    they read as ``reads`` says (default: one round ahead)."""

    def __init__(self, shells: Sequence[LearnerShell], reads: Reads | None = None) -> None:
        self.shells = {s.member: s for s in shells}
        families = {s.on_policy for s in shells}
        if len(families) != 1:
            raise ValueError("a learner group holds members of one family (on- or off-policy)")
        self.on_policy = families.pop()
        #: the members' stacks, kept from round to round
        self.stacks = Stacks()
        #: off-policy: when the members' batches are read
        self.reads: Reads = ReadAhead() if reads is None else reads
        for shell in shells[1:]:  # a stack's builds count once, in the first member's log
            shell.share_step(shells[0].step)
        #: the group's seconds in rounds, reading and updating (where the run's time goes)
        self.ledger = Ledger("learner")

    def pull(self, members: Sequence[int] | None = None) -> dict[int, TrainResult]:
        """One round of ``members`` (default: all): each learns what it was granted (up to
        :data:`ROUND_UPDATES` batches) or its waiting fragments; a member with nothing to
        learn reports 0 updates. Each learning member's result reports an equal share of the
        round's time."""
        with self.ledger.spend(CALL):
            return self._round(list(self.shells) if members is None else list(members))

    def settle(self, members: Sequence[int]) -> dict[int, TrainResult]:
        """Rounds until each of ``members`` learned everything its data earned so far (their
        workers are done: nothing more comes), then the weights of those of them that
        learned since they last published; each member's rounds as one result. Every
        member of the group learns in these rounds (a round of some would build a stack of
        those alone). The first round may learn a read sent before (ahead); only a round
        read since can say there is no more."""
        out = {m: TrainResult(0, {}, 0.0, None) for m in self.shells}
        first = True
        while True:
            results = self.pull()
            for m, r in results.items():
                out[m] = out[m].then(r)
            if not first and not any(results[m].updates for m in members):
                break
            first = False
        return {m: r.then(self.shells[m].catch_up()) if m in members else r
                for m, r in out.items()}

    def start_clock(self) -> None:
        """Training starts: count the group's time from now."""
        self.ledger.start()

    def time_spent(self) -> list[TimeSpent]:
        return [self.ledger.read()]

    def _round(self, members: list[int]) -> dict[int, TrainResult]:
        start = time.perf_counter()
        shells = [self.shells[m] for m in members]
        wanted = [ROUND_UPDATES] * len(members)
        with self.ledger.spend(WAITING_DATA):
            reads = self._read(shells, wanted)
        with self.ledger.spend(UPDATING):
            metrics = (self._fragments(shells, reads) if self.on_policy
                       else self._replay(shells, reads))
        learned = sum(1 for ms in metrics if ms)
        seconds = (time.perf_counter() - start) / max(learned, 1)
        results = {m: s.finish(ms, seconds if ms else 0.0)
                   for m, s, ms in zip(members, shells, metrics, strict=True)}
        if not self.on_policy:  # with this round's TD errors
            self.reads.send(shells, wanted)
        return results

    def _read(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
        """Each member's read; off-policy, every member's batches drawn in one buffer call
        (the members share the buffer), when :attr:`reads` says, and gathered in one set of
        arrays, one update's batches of every member adjacent
        (:func:`~distmarl.runtime.actors.learner.replay_readouts`)."""
        if self.on_policy or not shells:
            return [s.read(n) for s, n in zip(shells, updates, strict=True)]
        return self.reads.read(shells, updates)

    def _replay(self, shells: Sequence[LearnerShell], reads: Sequence[Readout]
                ) -> list[list[dict[str, float]]]:
        if not any(r.data for r in reads):  # the stacks are kept for the next round
            return [[] for _ in reads]
        weighted = any(r.weights is not None for r in reads)
        algos = [cast(OffPolicyMultiAgent, s.algo) for s in shells]
        results = self.stacks.replay(algos, [r.data for r in reads],
                                     [r.weights or [] for r in reads] if weighted else None)
        for shell, read, (_, errors) in zip(shells, reads, results, strict=True):
            shell.learned(read, errors)
        return [metrics for metrics, _ in results]

    def _fragments(self, shells: Sequence[LearnerShell], reads: Sequence[Readout]
                   ) -> list[list[dict[str, float]]]:
        """Round ``r`` updates every member that read an ``r``-th fragment, in order."""
        out: list[list[dict[str, float]]] = [[] for _ in shells]
        algos = [cast(OnPolicyMultiAgent, s.algo) for s in shells]
        for r in range(max((len(x.data) for x in reads), default=0)):
            frags = [x.data[r] if r < len(x.data) else None for x in reads]
            for k, metrics in enumerate(self.stacks.fragments(algos, frags)):
                if metrics is not None:
                    out[k].append(metrics)
        return out
