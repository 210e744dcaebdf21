"""The registry names every algorithm, and each declares what the runtime asks of one (its
rollout spec: family, global state, fields) with the values it gives."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.algorithms import (
    ALGORITHMS,
    IPPO,
    MADDPG,
    MAPPO,
    MATD3,
    Algorithm,
    FragmentLearner,
    Policy,
    ReplayLearner,
    algorithm_class,
)
from distmarl.config.hparams import default_hp, on_policy
from distmarl.factory import algorithm_class as factory_algorithm_class
from distmarl.types import (
    N_STEPS_FIELD,
    OFF_POLICY_FIELDS,
    ON_POLICY_FIELDS,
    STATE_FIELDS,
    RolloutSpec,
)

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


@pytest.mark.parametrize(("cls", "role", "global_state", "fields"), [
    (MADDPG, ReplayLearner, False, OFF_POLICY_FIELDS),
    (MATD3, ReplayLearner, False, OFF_POLICY_FIELDS),
    (IPPO, FragmentLearner, False, ON_POLICY_FIELDS),
    (MAPPO, FragmentLearner, True, (*ON_POLICY_FIELDS, *STATE_FIELDS)),
])
def test_the_class_declares_its_rollouts_once(cls: type[Algorithm], role: type,
                                              global_state: bool,
                                              fields: tuple[str, ...]) -> None:
    """Family (the learner it is, the same as its config's), the global state where the env
    has one and the fields its rows carry, before one is built and after."""
    assert issubclass(cls, role)
    spec = cls.rollout_spec({}, STATE)
    assert spec.on_policy is on_policy(cls.name) is (role is FragmentLearner)
    assert spec.global_state is global_state and spec.fields == fields
    assert cls.rollout_spec(None, None) == RolloutSpec(spec.on_policy)
    algo = cls(OBS, ACT, None, seed=0)
    assert algo.spec == RolloutSpec(spec.on_policy) and isinstance(algo, Policy)


def test_mappo_reads_the_state_when_built_with_it_and_asked() -> None:
    assert MAPPO.rollout_spec({"global_state": False}, STATE).global_state is False
    algo = MAPPO(OBS, ACT, None, seed=0, state_space=STATE)
    assert algo.spec.global_state and algo.spec.fields == (*ON_POLICY_FIELDS, *STATE_FIELDS)


def test_a_rollout_spec_refuses_what_no_family_records() -> None:
    with pytest.raises(ValueError, match="on-policy members only"):
        RolloutSpec(on_policy=False, global_state=True)
    with pytest.raises(ValueError, match="n_step 3: on-policy members learn from whole"):
        RolloutSpec(on_policy=True, n_step=3)
    assert RolloutSpec(False, n_step=3).buffer_fields == (*OFF_POLICY_FIELDS, N_STEPS_FIELD)


def test_an_off_policy_algorithm_acts_within_masks() -> None:
    algo = MADDPG(OBS, ACT, None, seed=0)
    obs = {a: np.zeros((4, 3), np.float32) for a in OBS}
    actions = algo.act(obs, explore=False)
    assert {a: x.shape for a, x in actions.items()} == {"a_0": (4,), "a_1": (4,)}
    only_1 = np.tile([0, 1], (4, 1)).astype(np.int8)
    assert (algo.act(obs, action_mask={"a_0": only_1})["a_0"] == 1).all()


def test_the_registry_the_config_and_the_hyperparameter_models_name_the_same_algorithms() -> None:
    from distmarl.config import ALGORITHM_CONFIGS, HP_MODELS

    assert sorted(ALGORITHMS) == sorted(ALGORITHM_CONFIGS) == sorted(HP_MODELS)
    for name, cls in ALGORITHMS.items():
        assert cls.name == name and default_hp(name) == cls.DEFAULT_HP
