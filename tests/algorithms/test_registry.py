"""The registry names every algorithm, and the base class declares what the runtime asks of one
(family, state reading, buffer fields), with the values each algorithm gives."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.algorithms import ALGORITHMS, IPPO, MADDPG, MAPPO, MATD3, Algorithm, algorithm_class
from distmarl.config.hparams import default_hp
from distmarl.factory import algorithm_class as factory_algorithm_class
from distmarl.types import OFF_POLICY_FIELDS, ON_POLICY_FIELDS, STATE_FIELDS

BOX = spaces.Box(-1.0, 1.0, (3,), np.float32)
OBS = {"a_0": BOX, "a_1": BOX}
ACT = {"a_0": spaces.Discrete(2), "a_1": spaces.Discrete(2)}
STATE = spaces.Box(-1.0, 1.0, (5,), np.float32)


def test_the_registry_maps_each_config_name_to_its_class() -> None:
    assert ALGORITHMS == {"MADDPG": MADDPG, "MATD3": MATD3, "IPPO": IPPO, "MAPPO": MAPPO}
    assert algorithm_class("MATD3") is MATD3
    assert factory_algorithm_class("IPPO") is IPPO
    assert all(issubclass(cls, Algorithm) for cls in ALGORITHMS.values())


@pytest.mark.parametrize("name", ["maddpg", "PPO", "Algorithm", "make_noise", ""])
def test_an_unknown_name_is_refused_with_the_known_ones(name: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown algorithm '{name}'; known: \['IPPO', "
                                         r"'MADDPG', 'MAPPO', 'MATD3'\]"):
        algorithm_class(name)


@pytest.mark.parametrize(("cls", "on_policy", "reads_state", "fields", "state_fields"), [
    (MADDPG, False, False, OFF_POLICY_FIELDS, OFF_POLICY_FIELDS),
    (MATD3, False, False, OFF_POLICY_FIELDS, OFF_POLICY_FIELDS),
    (IPPO, True, False, ON_POLICY_FIELDS, (*ON_POLICY_FIELDS, *STATE_FIELDS)),
    (MAPPO, True, True, ON_POLICY_FIELDS, (*ON_POLICY_FIELDS, *STATE_FIELDS)),
])
def test_the_class_declares_its_family_state_and_fields(
        cls: type[Algorithm], on_policy: bool, reads_state: bool, fields: tuple[str, ...],
        state_fields: tuple[str, ...]) -> None:
    assert cls.on_policy is on_policy and cls.reads_state is reads_state
    assert cls.buffer_fields() == fields and cls.buffer_fields(True) == state_fields
    assert cls.reads_state_with({}, STATE) is reads_state
    assert cls.reads_state_with(None, None) is False
    algo = cls(OBS, ACT, None, seed=0)
    assert algo.uses_state is False and algo.fields == fields


def test_mappo_reads_the_state_when_built_with_it_and_asked() -> None:
    assert MAPPO.reads_state_with({"global_state": False}, STATE) is False
    algo = MAPPO(OBS, ACT, None, seed=0, state_space=STATE)
    assert algo.uses_state and algo.fields == (*ON_POLICY_FIELDS, *STATE_FIELDS)


def test_an_off_policy_algorithm_acts_with_no_extras_within_masks() -> None:
    algo = MADDPG(OBS, ACT, None, seed=0)
    obs = {a: np.zeros((4, 3), np.float32) for a in OBS}
    actions, extras = algo.act_with_info(obs, explore=False)
    assert extras == {} and {a: x.shape for a, x in actions.items()} == {"a_0": (4,), "a_1": (4,)}
    only_1 = np.tile([0, 1], (4, 1)).astype(np.int8)
    actions, _ = algo.act_with_info(obs, action_mask={"a_0": only_1})
    assert (actions["a_0"] == 1).all()


def test_the_registry_the_config_and_the_hyperparameter_models_name_the_same_algorithms() -> None:
    from distmarl.config import ALGORITHM_CONFIGS, HP_MODELS

    assert sorted(ALGORITHMS) == sorted(ALGORITHM_CONFIGS) == sorted(HP_MODELS)
    for name, cls in ALGORITHMS.items():
        assert cls.name == name and default_hp(name) == cls.DEFAULT_HP
