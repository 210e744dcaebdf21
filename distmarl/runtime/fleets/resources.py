"""Resource requests for the run's actors, fitted to the cluster."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from distmarl.config import PopulationConfig, ResourceConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActorResources:
    """Ray options per actor kind: ``{"num_cpus": ..., "num_gpus": ...}``."""

    learner: dict[str, float]
    worker: dict[str, float]
    buffer: dict[str, float]
    coordinator: dict[str, float]
    scale: float  # < 1 when CPU requests were shrunk to fit the cluster
    #: each member's first rollout worker runs in its learner's process (:func:`colocates`)
    colocate: bool = False

    def host(self, members: int) -> dict[str, float]:
        """The options of a learner process hosting ``members`` members: the learner's GPUs,
        and each member's learner CPUs (and, colocated, its first worker's)."""
        per_member = self.learner["num_cpus"] + (self.worker["num_cpus"] if self.colocate
                                                 else 0.0)
        return {**self.learner, "num_cpus": per_member * members}


def plan_resources(resources: ResourceConfig, population: PopulationConfig,
                   cluster: dict[str, float], members: int | None = None,
                   learners: int | None = None, shards: int = 1) -> ActorResources:
    """Ask for what ``resources`` says for the actors of ``members`` members (default:
    ``population.size``; a league has that many per side) in ``learners`` learner processes
    (default: one per member; each asks for ``num_gpus_per_learner``) and ``shards`` buffer
    actors (``num_cpus_buffer`` each); shrink CPU requests
    proportionally where the cluster has fewer CPUs (so a 2-core laptop runs the same config as
    a cluster, oversubscribed), and ask for GPUs only where the cluster has them."""
    res, pop = resources, population
    size = pop.size if members is None else members
    wanted = wanted_cpus(res, pop, size, shards)
    cpus = float(cluster.get("CPU", 0.0))
    scale = 1.0 if wanted <= cpus or wanted == 0 else cpus / wanted * 0.999
    if scale < 1.0:
        log.info("the run asks for %.2f CPUs but the cluster has %.0f: CPU requests scaled by %.3f",
                 wanted, cpus, scale)
    gpus = float(cluster.get("GPU", 0.0))
    learner = {"num_cpus": res.num_cpus_per_learner * scale}
    if gpus > 0 and res.num_gpus_per_learner > 0:
        hosts = size if learners is None else learners
        if res.num_gpus_per_learner * hosts > gpus + 1e-9:
            raise ValueError(
                f"resources.num_gpus_per_learner={res.num_gpus_per_learner} for "
                f"{hosts} learners needs {res.num_gpus_per_learner * hosts} GPUs; "
                f"the cluster has {gpus:g}")
        learner["num_gpus"] = res.num_gpus_per_learner
    check_learner_step(res, gpu_learners="num_gpus" in learner, gpus=gpus)
    return ActorResources(
        learner=learner,
        worker={"num_cpus": res.num_cpus_per_worker * scale},
        buffer={"num_cpus": res.num_cpus_buffer * scale},
        coordinator={"num_cpus": 0.0},
        scale=scale,
        colocate=colocates(res.colocate, size, cluster),
    )


def wanted_cpus(resources: ResourceConfig, population: PopulationConfig, members: int,
                shards: int = 1) -> float:
    """The CPUs a run of ``members`` members and ``shards`` buffer actors asks for before any
    shrinking: each member's learner and rollout workers, and the buffer actors."""
    return (members * (resources.num_cpus_per_learner
                       + population.workers_per_member * resources.num_cpus_per_worker)
            + resources.num_cpus_buffer * shards)


def check_learner_step(resources: ResourceConfig, gpu_learners: bool, gpus: float = 0.0
                       ) -> None:
    """Refuse ``resources.learner_step: graph`` (a CUDA graph) for learners that get no GPU
    (``gpu_learners``; the cluster has ``gpus``), before any actor starts."""
    if resources.learner_step == "graph" and not gpu_learners:
        where = (f"the cluster has {gpus:g} GPUs and resources.num_gpus_per_learner is "
                 f"{resources.num_gpus_per_learner:g}" if gpus or resources.num_gpus_per_learner
                 else "there is no GPU for them")
        raise ValueError("resources.learner_step=graph captures the update step as a CUDA "
                         f"graph, which needs GPU learners, but {where}: use auto, eager or "
                         "compiled")


def colocates(setting: bool | str, members: int, cluster: Mapping[str, float]) -> bool:
    """Whether each member's first rollout worker runs in its learner's process
    (``resources.colocate``): as set, or (``"auto"``) where the cluster has fewer CPUs than a
    learner and a worker per member."""
    if setting == "auto":
        return float(cluster.get("CPU", 0.0)) < 2 * members
    return bool(setting)
