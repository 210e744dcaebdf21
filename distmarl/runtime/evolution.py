"""Evaluation, selection and mutation across learner actors: the coordinator's between-generation
work. The decisions come from ``distmarl.hpo`` (pure, seeded); this module carries them out."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
from ray.exceptions import ObjectLostError, RayActorError

from distmarl.hpo import MutationPlan
from distmarl.runtime.faults import (
    check_learners,
    get_with_retry,
    restore_learner,
    snapshot_learner,
)
from distmarl.runtime.members import DONE, RUN

if TYPE_CHECKING:
    from distmarl.runtime.coordinator import Coordinator

log = logging.getLogger(__name__)

#: What a lost actor or node raises here: the actor itself, or an object it owned (published
#: weights, a state) that died with it (``OwnerDiedError`` is an ``ObjectLostError``).
LOST = (RayActorError, ObjectLostError)


def evaluate_members(coord: Coordinator, slots: Sequence[int]) -> dict[int, float]:
    """Fresh weights, then evaluation episodes without exploration; appends to each fitness.
    A learner or worker that Ray restarted meanwhile is restored / asked again; weights lost
    with their learner's node are republished from the restored learner first."""
    check_learners(coord, list(slots))
    published = [get_with_retry(coord.learners[s].publish.remote) for s in slots]
    seeds = {}
    for slot, (version, box) in zip(slots, published):
        m = coord.members[slot]
        m.version, m.weights_box = version, box
        seeds[slot] = int(coord.rng.integers(2**31))
    refs = [_eval_call(coord, slot, seeds[slot])() for slot in slots]
    results = []
    for slot, ref in zip(slots, refs):
        try:
            results.append(ray.get(ref))
        except LOST:
            check_learners(coord, [slot])  # a restarted learner is restored and republished
            results.append(get_with_retry(_eval_call(coord, slot, seeds[slot])))
    fitness = {}
    for slot, scores in zip(slots, results):
        fitness[slot] = float(np.mean(scores))
        coord.members[slot].fitness.append(fitness[slot])
        coord.members[slot].evaluated_at = coord.members[slot].boundary
        coord.lineage.record_fitness(slot, fitness[slot])
    return fitness


def _eval_call(coord: Coordinator, slot: int, seed: int) -> Callable[[], Any]:
    """Submits ``slot``'s evaluation with the member's weights as they are when called."""
    evo, m = coord.cfg.evolution, coord.members[slot]
    worker = coord.workers[slot][0]
    return lambda: worker.evaluate.remote(m.version, m.weights_box, evo.eval_episodes,
                                          evo.eval_steps, seed)


def carry_out(coord: Coordinator, copies: Sequence[tuple[int, int]],
              plans: Sequence[MutationPlan]) -> None:
    """Copy full states (``(slot, source)`` pairs, straight through the object store), then
    mutate, then republish the changed members' weights. States are read before any is
    overwritten, so swaps are safe.

    When a learner (or its node) is lost part-way, every learner Ray restarted is restored
    from its snapshot, every member this step changes goes back to its last snapshot too (so
    no copy or mutation is applied twice), and the step is carried out once more."""
    try:
        _carry_out(coord, copies, plans)
    except LOST as err:
        log.warning("a learner was lost while copying / mutating (%s); redoing the step from "
                    "the members' snapshots", type(err).__name__)
        check_learners(coord)
        changed = sorted({slot for slot, _ in copies} | {p.member for p in plans if p.kind != "none"})
        for slot in changed:
            restore_learner(coord, slot)
        coord.events.append({"generation": coord.generation, "fault": "copy step redone",
                             "slots": changed})
        _carry_out(coord, copies, plans)


def _carry_out(coord: Coordinator, copies: Sequence[tuple[int, int]],
               plans: Sequence[MutationPlan]) -> None:
    learners = coord.learners
    sources = sorted({src for _, src in copies})
    states = {src: learners[src].get_state.remote() for src in sources}
    source_sums = {src: learners[src].weights_checksum.remote() for src in sources}
    loads = [learners[slot].load_state.remote(states[src]) for slot, src in copies]
    copied_sums = [learners[slot].weights_checksum.remote() for slot, _ in copies]
    mutated = [p for p in plans if p.kind != "none"]
    results = [learners[p.member].mutate.remote(p) for p in mutated]
    for (slot, src), hp, before, after in zip(copies, ray.get(loads),
                                              ray.get([source_sums[s] for _, s in copies]),
                                              ray.get(copied_sums)):
        coord.members[slot].hp = hp
        coord.copy_log.append({"generation": coord.generation, "slot": slot, "source": src,
                               "source_checksum": before, "copy_checksum": after})
    for plan, result in zip(mutated, ray.get(results)):
        coord.members[plan.member].hp = result["hp"]
        coord.events.append({"generation": coord.generation, "slot": plan.member,
                             "mutation": plan.describe(), "change": _plain(result["change"])})
    changed = sorted({slot for slot, _ in copies} | {p.member for p in mutated})
    for slot, (version, box) in zip(changed, ray.get([learners[s].publish.remote() for s in changed])):
        coord.members[slot].version, coord.members[slot].weights_box = version, box
        snapshot_learner(coord, slot)


def _plain(change: dict) -> dict:
    return {k: v for k, v in change.items() if isinstance(v, str | int | float | bool | list | dict)}


def _finished(coord: Coordinator, check_steps: bool = True) -> bool:
    """Set the stop reason when the target is reached or (``check_steps``) every member used
    its steps. Asynchronous mode checks steps per member instead: each has its last
    evaluation before it is done."""
    target = coord.cfg.training.target
    best = coord.best_fitness()
    if target is not None and best is not None and best >= target:
        coord.stop_reason = "target"
    elif check_steps and all(m.env_steps >= coord.cfg.training.max_steps for m in coord.members):
        coord.stop_reason = "max_steps"
    else:
        return False
    for m in coord.members:
        m.phase = DONE
    return True


def _next_boundary(coord: Coordinator, slot: int) -> None:
    m = coord.members[slot]
    m.boundary = min(m.boundary + coord.cfg.evolution.evo_steps, coord.cfg.training.max_steps)
    m.phase = RUN


def evolve_sync(coord: Coordinator) -> None:
    """One generation: evaluate everyone, tournament, mutate, carry out, record."""
    slots = list(range(len(coord.members)))
    evaluate_members(coord, slots)
    coord.fitness_history.append([m.fitness[-1] for m in coord.members])
    coord.generation += 1
    if _finished(coord):
        return
    plan = coord.selection.select([m.fitness for m in coord.members], coord.rng)
    hps = [coord.members[src].hp for src in plan.sources]
    plans = coord.mutations.plan(hps, coord.hp_config, coord.rng, elite=plan.elite)
    carry_out(coord, plan.copies(), plans)
    coord.lineage.record_generation(plan, plans, [m.hp for m in coord.members])
    for slot in slots:
        _next_boundary(coord, slot)


def evolve_async(coord: Coordinator, slot: int) -> None:
    """Population-based training's exploit and explore for one member at its evolution step."""
    evaluate_members(coord, [slot])
    m = coord.members[slot]
    coord.evolutions = getattr(coord, "evolutions", 0) + 1
    coord.generation = coord.evolutions // len(coord.members)
    if _finished(coord, check_steps=False):
        return
    if m.env_steps >= coord.cfg.training.max_steps:
        m.phase = DONE
        return
    latest = {x.slot: x.fitness[-1] for x in coord.members if x.fitness}
    source = coord.exploit.decide(slot, latest, coord.rng)
    if source is not None:
        plan = coord.mutations.plan([coord.members[source].hp], coord.hp_config, coord.rng,
                                    force=True)[0]
        plan = dataclasses.replace(plan, member=slot)
        carry_out(coord, [(slot, source)], [plan])
        coord.lineage.record_copy(slot, source, plan, m.hp)
    _next_boundary(coord, slot)


def pretrain_mutation(coord: Coordinator) -> None:
    """Mutate every member once before training (AgileRL's pre-training mutation pass)."""
    plans = coord.mutations.plan([m.hp for m in coord.members], coord.hp_config, coord.rng,
                                 force=True)
    carry_out(coord, [], plans)
    coord.lineage.record_generation(None, plans, [m.hp for m in coord.members])
