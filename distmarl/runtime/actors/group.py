"""Several members' learners in one process, answering their train calls together.

Each member keeps its own :class:`~distmarl.runtime.actors.learner.LearnerShell` (its
algorithm, buffer consumer, fragment reader, counters, published versions); a train call for
several of them reads each member's batches (all members' in one buffer call) or fragments as
its own call would, then updates them together (:mod:`distmarl.algorithms.groups`: the
members that share their shapes as one stacked computation, kept from call to call, any other
alone), and finishes each member's call as its own would (counters, priorities for the next
sample call, publishing). Off-policy, the members' next batches are then read ahead
(:mod:`~distmarl.runtime.actors.readahead`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import cast

from distmarl.algorithms.groups import Stacks
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.runtime.actors.learner import LearnerShell, Readout, TrainResult
from distmarl.runtime.actors.readahead import ReadAhead, Reads
from distmarl.runtime.logic.time_spent import CALL, UPDATING, WAITING_DATA, Ledger, TimeSpent


class LearnerGroup:
    """The learners of ``shells``' members (one family), addressed by member; off-policy,
    they read as ``reads`` says (default: one call ahead)."""

    def __init__(self, shells: Sequence[LearnerShell], reads: Reads | None = None) -> None:
        self.shells = {s.member: s for s in shells}
        families = {s.on_policy for s in shells}
        if len(families) != 1:
            raise ValueError("a learner group holds members of one family (on- or off-policy)")
        self.on_policy = families.pop()
        #: the members' stacks, kept from call to call
        self.stacks = Stacks()
        #: off-policy: when the members' batches are read
        self.reads: Reads = ReadAhead() if reads is None else reads
        for shell in shells[1:]:  # a stack's builds count once, in the first member's log
            shell.share_step(shells[0].step)
        #: the group's seconds in calls, reading and updating (where the run's time goes)
        self.ledger = Ledger("learner")

    def train_many(self, requests: Mapping[int, int]) -> dict[int, TrainResult]:
        """``requests[member]`` updates of each requested member, as its own ``train`` would
        do them; each member's result reports an equal share of the call's time."""
        with self.ledger.spend(CALL):
            return self._train_many(requests)

    def start_clock(self) -> None:
        """Training starts: count the group's time from now."""
        self.ledger.start()

    def time_spent(self) -> list[TimeSpent]:
        return [self.ledger.read()]

    def _train_many(self, requests: Mapping[int, int]) -> dict[int, TrainResult]:
        start = time.perf_counter()
        members = list(requests)
        shells = [self.shells[m] for m in members]
        with self.ledger.spend(WAITING_DATA):
            reads = self._read(shells, [requests[m] for m in members])
        with self.ledger.spend(UPDATING):
            metrics = (self._fragments(shells, reads) if self.on_policy
                       else self._replay(shells, reads))
        seconds = (time.perf_counter() - start) / max(len(members), 1)
        results = {m: s.finish(ms, seconds)
                   for m, s, ms in zip(members, shells, metrics, strict=True)}
        if not self.on_policy:  # with this call's TD errors
            self.reads.send(shells, [requests[m] for m in members])
        return results

    def _read(self, shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
        """Each member's read; off-policy, every member's batches drawn in one buffer call
        (the members share the buffer), when :attr:`reads` says, and gathered in one set of arrays, one update's batches of every member adjacent
        (:func:`~distmarl.runtime.actors.learner.replay_readouts`)."""
        if self.on_policy or not shells:
            return [s.read(n) for s, n in zip(shells, updates, strict=True)]
        return self.reads.read(shells, updates)

    def _replay(self, shells: Sequence[LearnerShell], reads: Sequence[Readout]
                ) -> list[list[dict[str, float]]]:
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
