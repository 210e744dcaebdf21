"""How collected data earns updates: the off-policy and the on-policy data path.

The runtime treats the two algorithm families the same way except for these rules, chosen
once per run (:func:`make_datapath`) and asked by the scheduler and the fleet:

==========================  ======================================  =============================
rule                        :class:`OffPolicyPath` (MADDPG, MATD3)  :class:`OnPolicyPath` (IPPO,
                                                                    MAPPO)
==========================  ======================================  =============================
steps per collect call      ``training.chunk_steps``                ``learn_step`` (one fragment)
updates a result earns      :class:`UpdateRule`: one per            one per fragment
                            ``learn_step`` transitions past
                            ``learning_delay``, once the buffer
                            holds ``learning_starts`` rows
updates a train call        owed again (a refused sample)           gone (a fragment lost to a
did not do                                                          fault is never learned)
policy-lag bound            ``replay.max_policy_lag`` versions      ``workers_per_member``
                            (the learner waits for slow workers)    updates (collection waits)
after a fault               nothing                                 the learner drops its
                                                                    waiting fragments
==========================  ======================================  =============================

Pure code: no Ray, no actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from distmarl.config import ReplayConfig, TrainingConfig
from distmarl.config.hparams import on_policy
from distmarl.config.replay import UpdateRule
from distmarl.runtime.logic.run_state import MemberState

#: most updates one train call asks for
MAX_UPDATES_PER_CALL = 32
#: an off-policy member's workers pause while its learner owes this many full train calls
MAX_OWED_CALLS = 2

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

    def may_learn(self, buffer_rows: int) -> bool:
        """Whether learners may sample from a buffer that received ``buffer_rows`` rows."""
        ...

    def on_collected(self, m: MemberState, env_steps: int, buffer_rows: int) -> None:
        """``m``'s collect call stored ``env_steps`` transitions (already counted in
        ``m.env_steps`` and ``buffer_rows``): add the updates they earn to ``m.owed``."""
        ...

    def on_trained(self, m: MemberState, requested: int, done: int) -> None:
        """``m``'s train call did ``done`` of its ``requested`` updates."""
        ...

    def may_train(self, m: MemberState, collecting: Sequence[Started]) -> bool:
        """Whether ``m``'s learner may start a train call (which may publish a new version)
        while ``collecting`` are ``m``'s collect calls in flight."""
        ...

    def may_collect(self, m: MemberState, collecting: Sequence[Started], learner_busy: bool,
                    workers: int) -> bool:
        """Whether another collect call of ``m`` may start."""
        ...


class OffPolicyPath:
    """Off-policy members: chunks of ``chunk_steps`` into a shared replay buffer, updates
    earned by ``updates`` (the update-to-data rule the reference trainer follows too)."""

    resyncs_fragments = False

    def __init__(self, chunk_steps: int, updates: UpdateRule, max_policy_lag: int) -> None:
        self.chunk_steps = chunk_steps
        self.updates = updates
        self.max_policy_lag = max_policy_lag

    def collect_steps(self, m: MemberState) -> int:
        return self.chunk_steps

    def may_learn(self, buffer_rows: int) -> bool:
        return self.updates.may_learn(buffer_rows)

    def on_collected(self, m: MemberState, env_steps: int, buffer_rows: int) -> None:
        m.owed += self.updates.earned(m.env_steps, env_steps, buffer_rows, m.learn_step)

    def on_trained(self, m: MemberState, requested: int, done: int) -> None:
        m.owed += requested - done  # a refused sample is owed again

    def may_train(self, m: MemberState, collecting: Sequence[Started]) -> bool:
        """No collect call in flight may fall more than ``max_policy_lag`` versions behind
        the version this call may publish: the learner waits for slow workers."""
        if not collecting:
            return True
        return m.version + 1 - min(version for _, version in collecting) <= self.max_policy_lag

    def may_collect(self, m: MemberState, collecting: Sequence[Started], learner_busy: bool,
                    workers: int) -> bool:
        """While the learner owes fewer than ``MAX_OWED_CALLS`` full calls (the
        update-to-data ratio stays exact) and, with ``max_policy_lag`` 0, no train call is in
        flight (it may publish a version the new chunk would lag behind)."""
        lag_ok = self.max_policy_lag >= 1 or not learner_busy
        return lag_ok and m.owed < MAX_OWED_CALLS * MAX_UPDATES_PER_CALL


class OnPolicyPath:
    """On-policy members: each collect call is one whole fragment of ``learn_step`` steps,
    learned once by the member's own learner, in the order fragments reach the buffer."""

    resyncs_fragments = True

    def collect_steps(self, m: MemberState) -> int:
        return int(m.hp["learn_step"])

    def may_learn(self, buffer_rows: int) -> bool:
        return True  # from the first fragment on: learning_starts does not apply

    def on_collected(self, m: MemberState, env_steps: int, buffer_rows: int) -> None:
        m.owed += 1  # one whole fragment, one update

    def on_trained(self, m: MemberState, requested: int, done: int) -> None:
        pass  # a fragment missing when the learner read is gone (a fault), never owed again

    def may_train(self, m: MemberState, collecting: Sequence[Started]) -> bool:
        return True  # the bound is kept on the collecting side (may_collect)

    def may_collect(self, m: MemberState, collecting: Sequence[Started], learner_busy: bool,
                    workers: int) -> bool:
        """While every fragment's policy lag stays within ``workers`` updates.

        A fragment starts with the weights of the member's ``m.updates`` updates so far (the
        learner publishes after every call) and is learned after the fragments that reach
        the buffer before it; counting every fragment that might (those owed, being learned,
        or being collected) bounds its lag: at most ``workers`` for a fragment starting now
        (``owed + requested + collecting <= workers``) and, for each fragment in flight, the
        updates since it began plus those. One worker: the next fragment is collected while
        the last is learned, so each is learned one update after the policy that collected
        it."""
        oldest = min((updates for updates, _ in collecting), default=m.updates)
        ahead = m.owed + m.requested + len(collecting)
        return ahead + (m.updates - oldest) <= workers


def make_datapath(algorithm: str, training: TrainingConfig,
                  replay: ReplayConfig | None) -> OffPolicyPath | OnPolicyPath:
    """The data path of the family of ``algorithm`` (its name); an off-policy path reads
    ``training``'s chunk size and ``replay``'s learning start, delay and policy-lag bound."""
    if on_policy(algorithm):
        return OnPolicyPath()
    if replay is None:  # (a loaded config fills it for them)
        raise ValueError(f"{algorithm} members replay rows: they need a replay section")
    return OffPolicyPath(training.chunk_steps,
                         UpdateRule(replay.learning_starts, replay.learning_delay),
                         replay.max_policy_lag)
