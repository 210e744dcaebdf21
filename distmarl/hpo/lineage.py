"""Who descends from whom: every individual's id, parent, member, generation, mutation and
hyperparameters, exported as JSON for the family-tree plot and kept in checkpoints.

A *member* is one place in the population (one learner, ``0 .. size - 1``); an *individual* is
one network-and-hyperparameter state a member holds, from the copy or mutation that made it to
the next one. Lineage JSON written with ``slot`` for ``member`` loads too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from distmarl.hpo.mutation import MutationPlan
from distmarl.hpo.tournament import SelectionPlan


@dataclass
class Individual:
    """One network-and-hyperparameter state that a member held for one or more generations."""

    id: int
    parent_id: int | None
    member: int
    generation: int
    mutation: str
    hyperparameters: dict[str, Any]
    fitness: list[float] = field(default_factory=list)
    mutation_detail: dict[str, Any] = field(default_factory=dict)
    algorithm: str = ""  #: its algorithm (a copy keeps its parent's; "" where unrecorded)


class Lineage:
    """The population's family tree; ``current[member]`` is the id of each member's individual."""

    def __init__(self, hps: Sequence[Mapping[str, Any]],
                 algorithms: Sequence[str] | None = None) -> None:
        names = list(algorithms) if algorithms is not None else [""] * len(hps)
        self.individuals: list[Individual] = [
            Individual(i, None, i, 0, "initial", dict(hp), algorithm=names[i])
            for i, hp in enumerate(hps)
        ]
        self.current: list[int] = list(range(len(hps)))
        self.generation = 0

    def record_fitness(self, member: int, fitness: float) -> None:
        self.individuals[self.current[member]].fitness.append(float(fitness))

    def record_generation(self, selection: SelectionPlan | None, mutations: Sequence[MutationPlan],
                          hps: Sequence[Mapping[str, Any]]) -> list[int]:
        """Advance one generation: member ``m`` copied ``selection.sources[m]`` (None: no
        selection) and then got ``mutations[m]``; ``hps[m]`` are its hyperparameters after.
        A member that neither copied nor mutated keeps its individual. Returns ``current``."""
        self.generation += 1
        parents = list(self.current)
        by_member = {m.member: m for m in mutations}
        for member in range(len(self.current)):
            source = member if selection is None else selection.sources[member]
            plan = by_member.get(member)
            mutated = plan is not None and plan.kind != "none"
            if source == member and not mutated:
                continue
            label = plan.describe() if mutated and plan is not None else "copy"
            child = Individual(len(self.individuals), parents[source], member, self.generation,
                               label, dict(hps[member]),
                               mutation_detail=dict(plan.detail) if mutated and plan else {},
                               algorithm=self.individuals[parents[source]].algorithm)
            self.individuals.append(child)
            self.current[member] = child.id
        return list(self.current)

    def record_copy(self, member: int, source: int, plan: MutationPlan | None,
                    hp: Mapping[str, Any]) -> int:
        """Asynchronous mode: ``member`` copied ``source`` (then ``plan``); returns the new id."""
        label = plan.describe() if plan is not None and plan.kind != "none" else "copy"
        child = Individual(len(self.individuals), self.current[source], member, self.generation,
                           label, dict(hp), mutation_detail=dict(plan.detail) if plan else {},
                           algorithm=self.individuals[self.current[source]].algorithm)
        self.individuals.append(child)
        self.current[member] = child.id
        return child.id

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "current": list(self.current),
                "individuals": [asdict(i) for i in self.individuals]}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Lineage:
        lineage = Lineage([])
        lineage.individuals = [Individual(**_renamed(i)) for i in d["individuals"]]
        lineage.current = list(d["current"])
        lineage.generation = int(d["generation"])
        return lineage


def _renamed(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An individual's JSON with ``member`` under its own name (files may say ``slot``)."""
    out = dict(entry)
    if "slot" in out and "member" not in out:
        out["member"] = out.pop("slot")
    return out
