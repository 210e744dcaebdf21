"""How collected data reaches learning: the off-policy and the on-policy data path.

The runtime treats the two algorithm families the same way except for these rules, chosen
once per run (:func:`make_datapath`) and asked by the scheduler and the fleet:

==========================  ======================================  =============================
rule                        :class:`OffPolicyPath` (MADDPG, MATD3)  :class:`OnPolicyPath` (IPPO,
                                                                    MAPPO)
==========================  ======================================  =============================
steps per collect call      ``training.chunk_steps``                ``learn_step`` (one fragment)
what a learner learns       what the buffer grants it: one update   each whole fragment, once
                            per ``learn_step`` env steps
                            (:mod:`distmarl.buffers.grants`)
policy-lag bound            the buffer's writers wait while the     ``workers_per_member``
                            learner owes too many updates           updates (collection waits)
after a fault               nothing                                 the learner drops its
                                                                    waiting fragments
==========================  ======================================  =============================

Pure code: no Ray, no actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from distmarl.config import TrainingConfig
from distmarl.config.hparams import on_policy
from distmarl.runtime.logic.run_state import MemberState

#: ``(member's updates, weights version it acts with)`` when a collect call in flight began
Started = tuple[int, int]


class DataPath(Protocol):
    """The rules that differ between the families (see the module's table)."""

    #: after a fault, the member's learner drops its waiting fragments and the member owes
    #: nothing (fragments may have reached the buffer uncounted, or come back from a snapshot)
    resyncs_fragments: bool

    def collect_steps(self, m: MemberState) -> int:
        """Vectorised env steps of one collect call of ``m``."""
        ...

    def may_collect(self, m: MemberState, collecting: Sequence[Started], workers: int) -> bool:
        """Whether another collect call of ``m`` may start while ``collecting`` are its calls
        in flight."""
        ...

    def on_collected(self, m: MemberState) -> None:
        """A collect call of ``m`` stored its rows."""
        ...

    def on_learned(self, m: MemberState, updates: int) -> None:
        """``m``'s learner said it did ``updates`` more updates."""
        ...


class OffPolicyPath:
    """Off-policy members: chunks of ``chunk_steps`` into a shared replay buffer, which grants
    each learner the updates its member's data earned and makes writers wait while a learner
    owes too many: collection needs no rule here."""

    resyncs_fragments = False

    def __init__(self, chunk_steps: int) -> None:
        self.chunk_steps = chunk_steps

    def collect_steps(self, m: MemberState) -> int:
        return self.chunk_steps

    def may_collect(self, m: MemberState, collecting: Sequence[Started], workers: int) -> bool:
        return True

    def on_collected(self, m: MemberState) -> None:
        pass

    def on_learned(self, m: MemberState, updates: int) -> None:
        pass


class OnPolicyPath:
    """On-policy members: each collect call is one whole fragment of ``learn_step`` steps,
    learned once by the member's own learner, in the order fragments reach the buffer;
    ``m.owed`` counts the fragments stored and not learned yet."""

    resyncs_fragments = True

    def collect_steps(self, m: MemberState) -> int:
        return int(m.hp["learn_step"])

    def may_collect(self, m: MemberState, collecting: Sequence[Started], workers: int) -> bool:
        """While every fragment's policy lag stays within ``workers`` updates.

        A fragment starts with the weights of the member's ``m.updates`` updates so far (the
        learner publishes after every fragment) and is learned after the fragments that reach
        the buffer before it; counting every fragment that might (those stored and not
        learned, or being collected) bounds its lag: at most ``workers`` for a fragment
        starting now (``owed + collecting <= workers``) and, for each fragment in flight, the
        updates since it began plus those. One worker: the next fragment is collected while
        the last is learned, so each is learned one update after the policy that collected
        it. The learner's updates reach the coordinator after it did them, so the count errs
        on the safe side."""
        oldest = min((updates for updates, _ in collecting), default=m.updates)
        ahead = m.owed + len(collecting)
        return ahead + (m.updates - oldest) <= workers

    def on_collected(self, m: MemberState) -> None:
        m.owed += 1  # one whole fragment, one update

    def on_learned(self, m: MemberState, updates: int) -> None:
        """(A learner may say it learned a fragment before the coordinator heard it was
        stored: the count dips below 0 until it does.)"""
        m.owed -= updates


def make_datapath(algorithm: str, training: TrainingConfig) -> OffPolicyPath | OnPolicyPath:
    """The data path of the family of ``algorithm`` (its name); an off-policy path collects
    ``training``'s chunks."""
    if on_policy(algorithm):
        return OnPolicyPath()
    return OffPolicyPath(training.chunk_steps)
