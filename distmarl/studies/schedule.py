"""Which of a sweep's runs start now: pure accounting of what each run asks of a Ray cluster
against what the runs already started hold.

A run's :class:`Need` is what its actors ask for before a run shrinks its CPU requests to fit
a small cluster (:func:`~distmarl.runtime.fleets.resources.plan_resources`): each member's
learner and rollout workers and the buffer actors, and the learners' GPUs. A need above the
cluster's CPUs is counted as the whole cluster (that run shrinks and runs alone); a need above
its GPUs cannot run at all, and the sweep is refused before anything starts (:func:`check_fits`).

    room = Room.of(cluster)
    for key in room.start(pending, running=0, cap=None):
        ...  # start the run; room.free(its need) once it ends
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distmarl.config import ConfigError, ExperimentConfig
from distmarl.runtime.fleets.resources import wanted_cpus

#: room left for rounding when needs of fractional CPUs are added up
SLACK = 1e-9


@dataclass(frozen=True)
class Need:
    """CPUs and GPUs one run's actors ask for."""

    cpus: float
    gpus: float = 0.0

    @classmethod
    def of(cls, cfg: ExperimentConfig, cluster_gpus: float) -> Need:
        """What ``cfg``'s actors ask of a cluster with ``cluster_gpus`` GPUs (its learners ask
        for GPUs only where the cluster has them; ``members_per_learner: auto`` takes as many
        learners as the GPUs hold)."""
        members = cfg.num_members
        shards = 1 if cfg.buffer.shards == "auto" else cfg.buffer.shards
        cpus = wanted_cpus(cfg.resources, cfg.population, members, shards)
        per_learner = cfg.resources.num_gpus_per_learner
        if per_learner <= 0 or cluster_gpus <= 0:
            return cls(cpus)
        grouping = cfg.population.members_per_learner
        learners = (members if grouping == "auto" else math.ceil(members / grouping))
        gpus = per_learner * learners
        if grouping == "auto":  # as many learners as the GPUs take, at least one
            gpus = max(per_learner, min(gpus, math.floor(cluster_gpus / per_learner)
                                        * per_learner))
        return cls(cpus, gpus)

    def within(self, cluster: Mapping[str, float]) -> Need:
        """This need as it holds ``cluster``: CPUs at most the cluster's (a larger run
        shrinks to fit it)."""
        return Need(min(self.cpus, float(cluster.get("CPU", 0.0))), self.gpus)


def check_fits(needs: Mapping[str, Need], cluster: Mapping[str, float]) -> None:
    """Refuse (ConfigError) a sweep with a run whose learners ask for more GPUs than
    ``cluster`` has: it could never start. ``needs``: each run's need, by the run's name."""
    gpus = float(cluster.get("GPU", 0.0))
    for name, need in needs.items():
        if need.gpus > gpus + SLACK:
            raise ConfigError(
                f"sweep run {name}: its learners ask for {need.gpus:g} GPUs "
                f"(resources.num_gpus_per_learner), the cluster has {gpus:g}: lower it or "
                "population.size, or give a larger cluster")


@dataclass
class Room:
    """What a cluster of ``cpus`` and ``gpus`` has left once the started runs' needs are
    taken."""

    cpus: float
    gpus: float
    total: Need

    @classmethod
    def of(cls, cluster: Mapping[str, float]) -> Room:
        cpus, gpus = float(cluster.get("CPU", 0.0)), float(cluster.get("GPU", 0.0))
        return cls(cpus, gpus, Need(cpus, gpus))

    def fits(self, need: Need) -> bool:
        held = need.within({"CPU": self.total.cpus})
        return held.cpus <= self.cpus + SLACK and held.gpus <= self.gpus + SLACK

    def take(self, need: Need, sign: float = 1.0) -> None:
        """Take what a run of ``need`` holds (``sign`` -1: give it back, as it ends)."""
        held = need.within({"CPU": self.total.cpus})
        self.cpus -= sign * held.cpus
        self.gpus -= sign * held.gpus

    def free(self, need: Need) -> None:
        self.take(need, sign=-1.0)

    def start(self, pending: Sequence[tuple[str, Need]], running: int,
              cap: int | None) -> list[str]:
        """The runs of ``pending`` (name, need; in order) to start now, their needs taken:
        each that fits in what is left, in order, while fewer than ``cap`` runs are running
        (``running`` already; None: no cap). With nothing running, the first always starts
        (a run larger than the cluster shrinks to fit it)."""
        chosen: list[str] = []
        for name, need in pending:
            if cap is not None and running + len(chosen) >= cap:
                break
            if self.fits(need) or (running == 0 and not chosen):
                self.take(need)
                chosen.append(name)
        return chosen
