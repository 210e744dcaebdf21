"""Who descends from whom: every individual's id, parent, generation, mutation and
hyperparameters, exported as JSON for the family-tree plot and kept in checkpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from distmarl.hpo.mutation import MutationPlan
from distmarl.hpo.tournament import SelectionPlan


@dataclass
class Individual:
    """One network-and-hyperparameter state that lived in a slot for one or more generations."""

    id: int
    parent_id: int | None
    slot: int
    generation: int
    mutation: str
    hyperparameters: dict[str, Any]
    fitness: list[float] = field(default_factory=list)
    mutation_detail: dict[str, Any] = field(default_factory=dict)


class Lineage:
    """The population's family tree; ``current[slot]`` is the id living in each slot."""

    def __init__(self, hps: Sequence[Mapping[str, Any]]) -> None:
        self.individuals: list[Individual] = [
            Individual(i, None, i, 0, "initial", dict(hp)) for i, hp in enumerate(hps)
        ]
        self.current: list[int] = list(range(len(hps)))
        self.generation = 0

    def record_fitness(self, slot: int, fitness: float) -> None:
        self.individuals[self.current[slot]].fitness.append(float(fitness))

    def record_generation(self, selection: SelectionPlan | None, mutations: Sequence[MutationPlan],
                          hps: Sequence[Mapping[str, Any]]) -> list[int]:
        """Advance one generation: slot ``s`` copied ``selection.sources[s]`` (None: no
        selection) and then got ``mutations[s]``; ``hps[s]`` are its hyperparameters after.
        An individual that neither copied nor mutated keeps its id. Returns ``current``."""
        self.generation += 1
        parents = list(self.current)
        by_slot = {m.slot: m for m in mutations}
        for slot in range(len(self.current)):
            source = slot if selection is None else selection.sources[slot]
            plan = by_slot.get(slot)
            mutated = plan is not None and plan.kind != "none"
            if source == slot and not mutated:
                continue
            label = plan.describe() if mutated and plan is not None else "copy"
            child = Individual(len(self.individuals), parents[source], slot, self.generation,
                               label, dict(hps[slot]),
                               mutation_detail=dict(plan.detail) if mutated and plan else {})
            self.individuals.append(child)
            self.current[slot] = child.id
        return list(self.current)

    def record_copy(self, slot: int, source: int, plan: MutationPlan | None,
                    hp: Mapping[str, Any]) -> int:
        """Asynchronous mode: ``slot`` copied ``source`` (then ``plan``); returns the new id."""
        label = plan.describe() if plan is not None and plan.kind != "none" else "copy"
        child = Individual(len(self.individuals), self.current[source], slot, self.generation,
                           label, dict(hp), mutation_detail=dict(plan.detail) if plan else {})
        self.individuals.append(child)
        self.current[slot] = child.id
        return child.id

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "current": list(self.current),
                "individuals": [asdict(i) for i in self.individuals]}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Lineage:
        lineage = Lineage([])
        lineage.individuals = [Individual(**i) for i in d["individuals"]]
        lineage.current = list(d["current"])
        lineage.generation = int(d["generation"])
        return lineage
