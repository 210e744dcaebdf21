"""Mutation plans: normalised odds, determinism, elite handling, rl_hp values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from distmarl.hpo import HyperparameterConfig, Mutations, RLParameter

HP_CONFIG = HyperparameterConfig(
    lr_actor=RLParameter(1e-4, 1e-2), batch_size=RLParameter(8, 512, dtype=int),
    learn_step=RLParameter(1, 64, dtype=int),
)
HPS = [{"lr_actor": 1e-3, "batch_size": 64, "learn_step": 16, "gamma": 0.95}] * 4


def test_probabilities_are_normalised() -> None:
    m = Mutations(no_mutation=2, architecture=2, new_layer_prob=0.5, parameters=2, activation=2,
                  rl_hp=2, rand_seed=0)
    kinds = Counter(p.kind for _ in range(2000) for p in m.draw(HPS, HP_CONFIG))
    for kind in ("none", "architecture", "parameters", "activation", "rl_hp"):
        assert abs(kinds[kind] / 8000 - 0.2) < 0.02, kinds


def test_same_seed_same_plans_and_seeds() -> None:
    m = Mutations(0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
    a = m.draw(HPS, HP_CONFIG, np.random.default_rng(5))
    b = m.draw(HPS, HP_CONFIG, np.random.default_rng(5))
    assert a == b and len({p.seed for p in a}) == 4


def test_architecture_plans_follow_new_layer_prob() -> None:
    m = Mutations(0, 1, new_layer_prob=0.25, parameters=0, activation=0, rl_hp=0, rand_seed=1)
    methods = Counter(p.detail["method"] for _ in range(2000) for p in m.draw(HPS, HP_CONFIG))
    layer = methods["add_layer"] + methods["remove_layer"]
    assert abs(layer / 8000 - 0.25) < 0.02
    assert abs(methods["add_node"] - methods["remove_node"]) < 0.1 * 8000


def test_rl_hp_plan_changes_one_hyperparameter_within_its_range() -> None:
    m = Mutations(0, 0, 0, 0, 0, rl_hp=1, rand_seed=2)
    seen = set()
    for _ in range(300):
        for p in m.draw(HPS, HP_CONFIG):
            name, old, new = p.detail["hp"], p.detail["old"], p.detail["new"]
            seen.add(name)
            assert old == HPS[0][name]
            assert new == HP_CONFIG[name].clip(old * 1.2) or new == HP_CONFIG[name].clip(old * 0.8)
            assert type(new) is type(old)
    assert seen == {"lr_actor", "batch_size", "learn_step"}


def test_elite_is_not_mutated_unless_asked() -> None:
    keep = Mutations(0, 0, 0, 1, 0, 0, mutate_elite=False, rand_seed=3)
    plans = keep.draw(HPS, HP_CONFIG, elite=2)
    assert [p.kind for p in plans] == ["parameters", "parameters", "none", "parameters"]
    allow = Mutations(0, 0, 0, 1, 0, 0, mutate_elite=True, rand_seed=3)
    assert allow.draw(HPS, HP_CONFIG, elite=2)[2].kind == "parameters"
    # a league keeps every side's elite
    both = keep.draw(HPS, HP_CONFIG, elite=(0, 2))
    assert [p.kind for p in both] == ["none", "parameters", "none", "parameters"]


def test_forced_pass_mutates_every_member() -> None:
    m = Mutations(no_mutation=0.9, architecture=0.1, new_layer_prob=0.5, parameters=0,
                  activation=0, rl_hp=0, rand_seed=4)
    assert all(p.kind == "architecture" for p in m.draw(HPS, HP_CONFIG, force=True))
    only_none = Mutations(1, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="non-zero mutation probability"):
        only_none.draw(HPS, HP_CONFIG, force=True)


def test_rl_hp_without_a_config_is_never_drawn() -> None:
    m = Mutations(0, 0, 0, 0, 0, rl_hp=1, rand_seed=0)
    assert {p.kind for p in m.draw(HPS, None)} == {"none"}


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"no_mutation": -1}, "must be >= 0"),
        ({"no_mutation": 0, "rl_hp": 0}, "not all 0"),
        ({"new_layer_prob": 1.5}, "new_layer_prob"),
        ({"mutation_sd": -0.1}, "mutation_sd"),
    ],
)
def test_bad_mutation_config(kwargs, words) -> None:
    args = {"no_mutation": 0.2, "architecture": 0, "new_layer_prob": 0.2, "parameters": 0,
            "activation": 0, "rl_hp": 0.2, **kwargs}
    with pytest.raises(ValueError, match=words):
        Mutations(**args)


def test_member_missing_a_searched_hyperparameter() -> None:
    m = Mutations(0, 0, 0, 0, 0, 1, rand_seed=0)
    with pytest.raises(ValueError, match="member 0 has no hyperparameter"):
        m.draw([{"gamma": 0.9}], HP_CONFIG)
