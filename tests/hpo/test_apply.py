"""Carrying out mutation plans on a real MADDPG: each kind changes what it says, nothing else."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.hpo import HyperparameterConfig, MutationPlan, Mutations, RLParameter, apply_mutation
from tests.algorithms.helpers import make

HP_CONFIG = HyperparameterConfig(lr_actor=RLParameter(1e-5, 1e-1), batch_size=RLParameter(8, 512, dtype=int))


def flat(state) -> dict[str, torch.Tensor]:
    """Every tensor of a state_dict, by path."""
    out = {}

    def walk(obj, path):
        if isinstance(obj, torch.Tensor):
            out[path] = obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{path}/{k}")
        elif isinstance(obj, list | tuple):
            for i, v in enumerate(obj):
                walk(v, f"{path}/{i}")

    walk(state, "")
    return out


def network_tensors(algo, prefix: str) -> dict[str, torch.Tensor]:
    """Weights (online and target, no optimiser state) whose path starts with ``prefix``."""
    return {k: v for k, v in flat(algo.state_dict()["networks"]).items()
            if k.startswith(("/online" + prefix, "/target" + prefix))}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_none_changes_nothing_bit_for_bit() -> None:
    algo = make(seed=1)
    before = algo.state_dict()
    apply_mutation(algo, MutationPlan(0, "none", {}, 3))
    after = algo.state_dict()
    assert before["hp"] == after["hp"] and same(flat(before), flat(after))


def test_rl_hp_changes_that_hyperparameter_only_and_the_optimiser_lr() -> None:
    algo = make(seed=1)
    nets = network_tensors(algo, "")
    hp = dict(algo.hp)
    change = apply_mutation(algo, MutationPlan(0, "rl_hp", {"hp": "lr_actor", "old": hp["lr_actor"], "new": 0.02}, 5))
    assert change == {"kind": "rl_hp", "hp": "lr_actor", "old": hp["lr_actor"], "new": 0.02}
    assert algo.hp == {**hp, "lr_actor": 0.02}
    assert same(network_tensors(algo, ""), nets)
    lrs = [g["lr"] for k, opt in algo.nets.optim.items() if k.startswith("actor") for g in opt.param_groups]
    assert lrs and all(lr == 0.02 for lr in lrs)
    critic_lrs = [g["lr"] for k, opt in algo.nets.optim.items() if k.startswith("critic") for g in opt.param_groups]
    assert all(lr == hp["lr_critic"] for lr in critic_lrs)


def test_parameters_mutation_moves_actor_weights_only() -> None:
    algo = make(seed=2)
    critics, actors, hp = network_tensors(algo, "/critic"), network_tensors(algo, "/actor"), dict(algo.hp)
    apply_mutation(algo, MutationPlan(0, "parameters", {"mutation_sd": 0.1}, 7))
    assert algo.hp == hp
    assert same(network_tensors(algo, "/critic"), critics)
    moved = network_tensors(algo, "/actor")
    assert moved.keys() == actors.keys()
    assert any(not torch.equal(moved[k], actors[k]) for k in actors if k.startswith("/online"))


@pytest.mark.parametrize("method", ["add_layer", "remove_layer", "add_node", "remove_node"])
def test_architecture_mutation_changes_architecture_not_hyperparameters(method) -> None:
    algo = make(seed=3)
    hp = dict(algo.hp)
    arch_before = algo.get_weights()["arch"]
    change = apply_mutation(algo, MutationPlan(0, "architecture", {"method": method}, 11))
    assert change["kind"] == "architecture" and algo.hp == hp
    if change.get("networks") and any(n.get("op") for n in change["networks"].values()):
        assert algo.get_weights()["arch"] != arch_before
    obs = {"speaker_0": np.zeros((2, 3), np.float32), "listener_0": np.zeros((2, 11), np.float32)}
    assert algo.act(obs, explore=False)["listener_0"].shape == (2, 5)


def test_activation_mutation_switches_activation() -> None:
    algo = make(seed=4)
    before = algo.get_weights()["arch"]
    apply_mutation(algo, MutationPlan(0, "activation", {"choices": ["ReLU", "ELU", "GELU"]}, 13))
    assert algo.get_weights()["arch"] != before


def test_the_same_plan_gives_the_same_network_anywhere() -> None:
    a, b = make(seed=5), make(seed=5)
    plan = MutationPlan(0, "architecture", {"method": "add_node"}, 17)
    apply_mutation(a, plan)
    apply_mutation(b, plan)
    assert same(flat(a.state_dict()["networks"]), flat(b.state_dict()["networks"]))


def test_elite_keeps_weights_and_hyperparameters_bit_for_bit() -> None:
    members = [make(seed=s) for s in range(3)]
    before = [flat(m.state_dict()) for m in members]
    muts = Mutations(0, 0.3, 0.5, 0.3, 0.2, 0.2, mutate_elite=False, rand_seed=0)
    for _ in range(5):
        plans = muts.draw([m.hp for m in members], HP_CONFIG, elite=1)
        for m, plan in zip(members, plans):
            apply_mutation(m, plan)
    assert same(flat(members[1].state_dict()), before[1])
    assert not same(flat(members[0].state_dict()), before[0])
