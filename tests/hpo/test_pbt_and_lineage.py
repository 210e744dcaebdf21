"""Asynchronous exploit copies only from the top; lineage records who copied whom."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distmarl.hpo import AsyncExploit, Lineage, MutationPlan, SelectionPlan


def test_async_mode_copies_only_from_the_top_fraction() -> None:
    pbt = AsyncExploit(bottom_frac=0.25, top_frac=0.25)
    fitness = {m: float(f) for m, f in enumerate([5, 1, 8, 3, 7, 2, 6, 4])}  # top: 2, 4; bottom: 1, 5
    rng = np.random.default_rng(0)
    for member in fitness:
        choices = {pbt.decide(member, fitness, rng) for _ in range(200)}
        if member in (1, 5):
            assert choices == {2, 4}
        else:
            assert choices == {None}


def test_async_mode_ignores_members_without_fitness_and_needs_the_members_own() -> None:
    pbt = AsyncExploit(0.5, 0.5)
    assert pbt.decide(0, {0: 1.0}, np.random.default_rng(0)) is None
    assert pbt.decide(0, {0: 1.0, 3: 2.0}, np.random.default_rng(0)) == 3
    with pytest.raises(ValueError, match="member 2 has no fitness"):
        pbt.decide(2, {0: 1.0}, np.random.default_rng(0))
    with pytest.raises(ValueError, match="bottom_frac"):
        AsyncExploit(bottom_frac=0.8)


def test_lineage_records_copies_and_mutations() -> None:
    lineage = Lineage([{"lr": 1.0}, {"lr": 2.0}, {"lr": 3.0}])
    for member, fit in enumerate([1.0, 3.0, 2.0]):
        lineage.record_fitness(member, fit)
    selection = SelectionPlan(sources=(1, 1, 2), elite=1, fitness=(1.0, 3.0, 2.0), order=(1, 0, 2))
    mutations = [MutationPlan(0, "rl_hp", {"hp": "lr", "old": 2.0, "new": 2.4}, 1),
                 MutationPlan(1, "none", {}, 2), MutationPlan(2, "none", {}, 3)]
    current = lineage.record_generation(selection, mutations, [{"lr": 2.4}, {"lr": 2.0}, {"lr": 3.0}])
    assert current == [3, 1, 2]  # only member 0 holds a new individual
    child = lineage.individuals[3]
    assert (child.parent_id, child.member, child.generation, child.mutation) == (1, 0, 1, "rl_hp:lr")
    assert child.hyperparameters == {"lr": 2.4}
    new_id = lineage.record_copy(2, 0, MutationPlan(2, "architecture", {"method": "add_layer"}, 4),
                                 {"lr": 2.4})
    assert lineage.individuals[new_id].parent_id == 3
    assert lineage.individuals[new_id].mutation == "architecture:add_layer"
    data = json.loads(json.dumps(lineage.to_json()))
    again = Lineage.from_json(data)
    assert again.to_json() == lineage.to_json()
    assert lineage.individuals[1].fitness == [3.0]


def test_lineage_json_with_slot_for_member_loads() -> None:
    """Lineage JSON may name an individual's member ``slot`` (checkpoints keep it as written)."""
    old = {"generation": 1, "current": [2, 1], "individuals": [
        {"id": 0, "parent_id": None, "slot": 0, "generation": 0, "mutation": "initial",
         "hyperparameters": {"lr": 1.0}, "fitness": [1.0], "mutation_detail": {}},
        {"id": 1, "parent_id": None, "slot": 1, "generation": 0, "mutation": "initial",
         "hyperparameters": {"lr": 2.0}, "fitness": [3.0], "mutation_detail": {}},
        {"id": 2, "parent_id": 1, "slot": 0, "generation": 1, "mutation": "copy",
         "hyperparameters": {"lr": 2.0}, "fitness": [], "mutation_detail": {}}]}
    lineage = Lineage.from_json(old)
    assert [(i.id, i.member, i.parent_id) for i in lineage.individuals] == [(0, 0, None), (1, 1, None),
                                                                           (2, 0, 1)]
    assert lineage.current == [2, 1] and lineage.generation == 1
    assert [i["member"] for i in lineage.to_json()["individuals"]] == [0, 1, 0]
    lineage.record_fitness(0, 2.5)
    assert lineage.individuals[2].fitness == [2.5]
