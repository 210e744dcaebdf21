"""The fleet: the one part of a run that calls the learners, rollout workers and buffer.

Generations, the league, the recorder and the run loop speak the run's verbs (:class:`Fleet`):
submit collect and settle calls and take the finished ones (and what learners learned, as they
learn on their own), publish weights, evaluate, play league games, copy and mutate members, set hyperparameters, read and load states. Two fleets
carry them out:

- :class:`~distmarl.runtime.fleets.ray_fleet.RayFleet`: actors on a Ray cluster, calls in flight
  side by side, restarts, snapshots and what was lost (:class:`FaultLog`);
- :class:`~distmarl.runtime.fleets.local_fleet.LocalFleet`: the same shells as plain objects in
  this process (no Ray started, no actor; the shells' modules still import ray), each call run
  when it is submitted; a seeded run is reproducible step for step.

Both build their shells from one :class:`FleetSpec`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple, Protocol

from distmarl.buffers.grants import UpdateGrants
from distmarl.buffers.shards import ShardLayout, resolve_shards
from distmarl.collect.cancel import Cancel
from distmarl.collect.evaluation import Scores
from distmarl.config import AlgorithmConfig, EnvConfig, PopulationConfig, ResourceConfig
from distmarl.config.replay import EVERY_STEP, UpdateRule
from distmarl.hpo import MutationPlan
from distmarl.league.seating import GameResults, LeaguePlan, SeatingRules
from distmarl.runtime.actors.clients import BufferClient, Store
from distmarl.runtime.actors.shards import sharded
from distmarl.runtime.logic.grouping import learner_groups, members_per_learner
from distmarl.runtime.logic.scheduler import Call
from distmarl.runtime.logic.time_spent import TimeSpent
from distmarl.types import RolloutSpec

__all__ = ["Copied", "FaultLog", "Fleet", "FleetSpec", "Mutated", "Play"]


@dataclass
class FaultLog:
    """What faults cost the run (all zero in one process)."""

    worker_restarts: int = 0
    lost_chunks: int = 0
    lost_env_steps: int = 0
    learner_restarts: int = 0
    lost_updates: int = 0
    buffer_restarts: int = 0
    buffer_lost_rows: int = 0
    failures: int = 0
    dropped_nonfinite_rows: int = 0  # agent rows with NaN / inf the envs dropped ("drop" mode)

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class FleetSpec:
    """What the shells are built from: ``members`` learners (each building
    ``algorithms[member]``, grouped into processes by :meth:`learner_groups`),
    ``population.workers_per_member`` rollout workers each (their envs
    from ``env``, their rows as ``rollout`` says: :func:`distmarl.factory.rollout_spec`), one
    buffer from ``buffer_kwargs`` (:func:`distmarl.factory.buffer_kwargs`) with its update
    grants (:meth:`grants`), spread over ``shards`` replay shards (:mod:`distmarl.buffers.shards`;
    each shard's arguments and grants from :meth:`shard_kwargs` and :meth:`grants`); every
    shell's seed derived from ``seed``. ``league``: a competitive game's seating rules
    (None: cooperative). ``resources`` and ``snapshot_interval_s`` matter on Ray only."""

    members: int
    population: PopulationConfig
    env: EnvConfig
    algorithms: Sequence[AlgorithmConfig]
    spaces: tuple[Any, ...]
    buffer_kwargs: dict[str, Any]
    rollout: RolloutSpec
    weight_sync_updates: int
    seed: int
    resources: ResourceConfig
    snapshot_interval_s: float = 0.0
    league: SeatingRules | None = None
    convert: bool = False
    #: when members' data earns their learners updates (off-policy; on-policy: every step)
    update_rule: UpdateRule = EVERY_STEP
    #: updates a learner may owe before its member's writers wait (None: never on Ray)
    max_owed: int | None = None
    #: replay shards (``auto``: resolved by the fleet that builds them, :meth:`resolved`)
    shards: int | str = 1

    def resolved(self, nodes: int) -> FleetSpec:
        """This spec with its shards counted for a cluster of ``nodes`` nodes
        (:func:`~distmarl.buffers.shards.resolve_shards`)."""
        writers = self.members * self.population.workers_per_member
        return replace(self, shards=resolve_shards(self.shards, nodes, writers))

    @property
    def layout(self) -> ShardLayout:
        """How the shards divide the buffer (the spec must be :meth:`resolved`)."""
        if not isinstance(self.shards, int):
            raise ValueError(f"buffer.shards={self.shards!r} is not resolved yet")
        return ShardLayout(self.shards)

    def shard_kwargs(self, shard: int) -> dict[str, Any]:
        """Replay shard ``shard``'s buffer arguments (its share of the capacity)."""
        return self.layout.buffer_kwargs(self.buffer_kwargs, shard)

    def grants(self, writers_wait: bool) -> UpdateGrants:
        """A shard's update grants under its share of :attr:`update_rule`; ``writers_wait``:
        past its share of :attr:`max_owed` (where learners run beside the workers; in one
        process the learners learn everything after each turn, and a writer waiting there
        would wait forever)."""
        layout = self.layout
        return UpdateGrants(layout.rule(self.update_rule),
                            layout.max_owed(self.max_owed) if writers_wait else None)

    def learner_groups(self, cluster: Mapping[str, float] | None) -> list[list[int]]:
        """The members of each learner process (``population.members_per_learner`` on
        ``cluster``, whose cores and GPUs count for ``auto``; None: in one process)."""
        per = members_per_learner(self.population.members_per_learner, self.members, cluster,
                                  self.resources.num_gpus_per_learner)
        return learner_groups(self.members, per)

    def learner_kwargs(self, member: int, shards: Sequence[BufferClient], store: Store
                       ) -> dict[str, Any]:
        """:class:`~distmarl.runtime.actors.learner.LearnerShell`'s arguments (``shards``:
        each replay shard's client)."""
        return dict(member=member, algo_cfg=self.algorithms[member], spaces=self.spaces,
                    buffer=sharded(shards), seed=self.seed * 1009 + member,
                    weight_sync_updates=self.weight_sync_updates, num_envs=self.env.num_envs,
                    fields=tuple(self.buffer_kwargs["field_names"]), convert=self.convert,
                    store=store, learner_step=self.resources.learner_step)

    def worker_kwargs(self, member: int, worker: int, shards: Sequence[BufferClient],
                      store: Store, cancel: Cancel) -> dict[str, Any]:
        """:class:`~distmarl.runtime.actors.rollout.RolloutShell`'s arguments (``shards``: each
        replay shard's client, written in turn from the worker's own; ``cancel``: the stop its
        evaluations and games look at)."""
        first = self.layout.first_shard(member * self.population.workers_per_member + worker)
        return dict(member=member, worker=worker, env_cfg=self.env,
                    algo_cfg=self.algorithms[member], spaces=self.spaces,
                    buffer=sharded(shards, first),
                    seed=self.seed * 7919 + member * 101 + worker, spec=self.rollout,
                    league=self.league, store=store, cancel=cancel)


class Play(NamedTuple):
    """One set of league games on member ``worker``'s first rollout worker (the arguments of
    its ``play``): the member's weights ``version`` / ``box`` against ``opponent``
    ``(player, version, box, side)``; ``learner`` (``ref/<name>``) plays in its place."""

    worker: int
    version: int
    box: list[Any] | None
    opponent: tuple[str, int | None, list[Any] | None, str]
    games: int
    seed: int
    side: str | None
    explore: bool
    learner: str | None = None


class Copied(NamedTuple):
    """A copy carried out: ``member`` took ``source``'s full state (and hyperparameters
    ``hp``)."""

    member: int
    source: int
    hp: dict[str, Any]


class Mutated(NamedTuple):
    """A mutation carried out: its ``plan``, what changed, the member's hyperparameters."""

    plan: MutationPlan
    change: dict[str, Any]
    hp: dict[str, Any]


class Fleet(Protocol):
    """The run's verbs. Weights a fleet publishes go to the members of the run state it was
    given (``set_weights``), so the next collect call carries them. Evaluations and games
    (:meth:`evaluate`, :meth:`score_fixed`, :meth:`play`) stop part-way when the run's stop
    comes first, raising :class:`~distmarl.collect.cancel.Cancelled`: no result."""

    faults: FaultLog
    #: where published weights and league snapshots live
    store: Store
    #: each learner's torch device (``cuda`` / ``cpu``)
    learner_devices: list[str]
    learner_steps: list[str]  # how each learner runs its update step (resources.learner_step)
    #: calls made to the workers and learners so far, by kind
    calls: Counter[str]

    def hyperparameters(self) -> list[dict[str, Any]]:
        """Every member's hyperparameters, in member order."""

    def watch(self) -> None:
        """Before the loop: publish every member's weights and note what runs where."""

    def submit(self, calls: Sequence[tuple[Call, LeaguePlan | None]]) -> None:
        """Start one turn's calls (a league's collect call with the worker's next plan): the
        settle calls of one learner process together (one call carries them)."""

    def finished(self, timeout_s: float) -> list[tuple[Call, Any]]:
        """Calls that ended well since the last look, with their results, and what learners
        said they learned since (``learned``; waits up to ``timeout_s`` for one); a failed
        call is accounted for here and not returned."""

    def drain(self, timeout_s: float) -> list[tuple[Call, Any]]:
        """The learners stopped (what they learned since they last said), then every call
        still in flight, once ended (waits up to ``timeout_s``)."""

    def tick(self) -> None:
        """On every turn of the loop: upkeep that must not wait."""

    def publish(self, members: Sequence[int], snapshot: bool = False) -> None:
        """Publish ``members``' current weights (``snapshot``: and keep their states, where
        the fleet keeps snapshots)."""

    def evaluate(self, members: Sequence[int], episodes: int, max_steps: int | None,
                 seed: int, explore: bool) -> list[Scores]:
        """Each member's evaluation episodes with its published weights, in order."""

    def score_fixed(self, members: Sequence[int], episodes: int, seed: int, explore: bool
                    ) -> tuple[list[Scores], Scores]:
        """Each member's scores on the fixed episodes of ``seed``, and uniform random play's."""

    def play(self, games: Sequence[Play]) -> list[GameResults]:
        """League games, in order."""

    def carry_out(self, copies: Sequence[tuple[int, int]], plans: Sequence[MutationPlan]
                  ) -> tuple[list[Copied], list[Mutated]]:
        """Copy full states (``(member, source)``; all read before any is written, so swaps
        are safe), then mutate. The changed members' weights are not published here: the
        caller publishes every member its step changed, once."""

    def set_hyperparameters(self, values: Mapping[int, dict[str, Any]]
                            ) -> dict[int, dict[str, Any]]:
        """Set each member's ``values``; each member's hyperparameters after."""

    def learner_states(self) -> list[dict[str, Any]]:
        """Every learner's full state, in member order."""

    def buffer_state(self) -> list[dict[str, Any]] | None:
        """Each replay shard's state for a checkpoint (None where it is not kept)."""

    def load(self, learner_states: Sequence[dict[str, Any]],
             buffer_state: Sequence[dict[str, Any]] | None) -> None:
        """Load a checkpoint's states (``buffer_state``: each shard's)."""

    def resync(self, members: Sequence[int]) -> None:
        """Where fragments resynchronise (on-policy): each member's learner drops the fragments
        waiting for it and the member owes no update (after a resume or a fault)."""

    def start_clocks(self) -> None:
        """Training starts: every actor counts where its time goes from now."""

    def time_spent(self) -> list[TimeSpent]:
        """Every actor's ledger (one per learner group); actors lost and not back yet are
        left out."""

    def close(self) -> None:
        """Release what the fleet holds (envs, actors)."""


def check_shard_count(states: Sequence[Any], shards: int) -> None:
    """A checkpoint's buffer states must be one per replay shard."""
    if len(states) != shards:
        raise ValueError(f"the checkpoint's buffer has {len(states)} shards, the run "
                         f"{shards} (buffer.shards)")


def check_state_count(states: Sequence[Any], members: int) -> None:
    """A checkpoint's learner states must be one per member."""
    if len(states) != members:
        raise ValueError(f"the checkpoint holds {len(states)} members, the config asks for "
                         f"{members}")
