"""RLParameter and HyperparameterConfig: ranges, int stays int, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.hpo import HyperparameterConfig, RLParameter


def test_int_parameter_stays_int_and_in_bounds() -> None:
    p = RLParameter(min=8, max=512, dtype=int)
    rng = np.random.default_rng(0)
    assert {p.mutate(64, rng) for _ in range(200)} == {77, 51}  # 64 * 1.2 = 76.8, 64 * 0.8 = 51.2
    value = 64
    for _ in range(1000):
        value = p.mutate(value, rng)
        assert type(value) is int and 8 <= value <= 512


def test_float_parameter_grows_or_shrinks_with_equal_odds_and_clips() -> None:
    p = RLParameter(min=1e-4, max=1e-2, grow_factor=1.5, shrink_factor=0.5)
    rng = np.random.default_rng(1)
    draws = [p.mutate(1e-3, rng) for _ in range(4000)]
    assert set(np.round(draws, 12)) == {1.5e-3, 0.5e-3}
    assert abs(np.mean(np.isclose(draws, 1.5e-3)) - 0.5) < 0.03
    assert p.mutate(9.9e-3, np.random.default_rng(3)) <= 1e-2
    assert all(type(d) is float for d in draws)
    assert p.clip(5) == 1e-2 and p.clip(0) == 1e-4


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"min": 5, "max": 1}, "min 5 is greater than max 1"),
        ({"min": 0, "max": 1, "grow_factor": 0}, "grow_factor must be > 0"),
        ({"min": 0, "max": 1, "shrink_factor": -1}, "shrink_factor must be > 0"),
        ({"min": 0, "max": 1, "dtype": str}, "dtype must be int or float"),
    ],
)
def test_bad_parameter(kwargs, words) -> None:
    with pytest.raises(ValueError, match=words):
        RLParameter(**kwargs)


def test_config_rejects_parameters_the_algorithm_does_not_have() -> None:
    cfg = HyperparameterConfig(lr_actor=RLParameter(1e-4, 1e-2), batch_szie=RLParameter(8, 512, dtype=int))
    with pytest.raises(ValueError, match=r"\['batch_szie'\] are not hyperparameters of MADDPG"):
        cfg.check_against("MADDPG")
    with pytest.raises(ValueError, match=r"\['lr_actor'\] are not hyperparameters of IPPO"):
        HyperparameterConfig(lr_actor=RLParameter(1e-4, 1e-2)).check_against("IPPO")
    HyperparameterConfig(lr_actor=RLParameter(1e-4, 1e-2), policy_freq=RLParameter(1, 4, dtype=int)
                         ).check_against("MATD3")
    with pytest.raises(ValueError, match="'lr' must be an RLParameter"):
        HyperparameterConfig(lr=0.1)


def test_config_rejects_switches() -> None:
    """Bool hyperparameters (IPPO's value_norm, MADDPG's O_U_noise) have nothing to perturb."""
    cfg = HyperparameterConfig(lr=RLParameter(1e-4, 1e-2), value_norm=RLParameter(0, 1, dtype=int))
    with pytest.raises(ValueError, match=r"\['value_norm'\] of IPPO are on/off switches"):
        cfg.check_against("IPPO")
    HyperparameterConfig(lr=RLParameter(1e-4, 1e-2)).check_against("IPPO")
    with pytest.raises(ValueError, match=r"\['O_U_noise'\] of MADDPG"):
        HyperparameterConfig(O_U_noise=RLParameter(0, 1, dtype=int)).check_against("MADDPG")


@pytest.mark.parametrize("algorithm,name,param,message", [
    ("MADDPG", "lr_actor", RLParameter(0.0, 1e-2),
     "the search range [0.0, 0.01] of lr_actor: MADDPG hyperparameter lr_actor must be > 0, got 0.0"),
    ("IPPO", "gamma", RLParameter(0.9, 1.2),
     "the search range [0.9, 1.2] of gamma: IPPO hyperparameter gamma must be within [0, 1], got 1.2"),
    ("MATD3", "policy_freq", RLParameter(0, 4, dtype=int),
     "the search range [0, 4] of policy_freq: MATD3 hyperparameter policy_freq must be an int >= 1, "
     "got 0"),
    ("IPPO", "update_epochs", RLParameter(1.5, 8),
     "the search range [1.5, 8] of update_epochs: IPPO hyperparameter update_epochs must be an int "
     ">= 1, got 1.5"),
])
def test_config_rejects_ranges_that_break_the_hyperparameter_s_rule(algorithm, name, param,
                                                                     message) -> None:
    """Every rule is an interval, so bounds that pass it keep every mutated value within it."""
    with pytest.raises(ValueError) as err:
        HyperparameterConfig(**{name: param}).check_against(algorithm)
    assert str(err.value) == message


def test_every_value_a_mutation_reaches_passes_the_checker() -> None:
    from distmarl.config import check_hp_value

    cfg = HyperparameterConfig(gamma=RLParameter(0.5, 1.0, grow_factor=1.5),
                               batch_size=RLParameter(1, 16, dtype=int, shrink_factor=0.1),
                               lr=RLParameter(1e-6, 1e-2))
    cfg.check_against("IPPO")
    rng = np.random.default_rng(0)
    values = {"gamma": 0.9, "batch_size": 8, "lr": 1e-3}
    for _ in range(200):
        for name, value in list(values.items()):
            values[name] = cfg[name].mutate(value, rng)
            assert check_hp_value("IPPO", name, values[name]) == values[name]
    assert values["batch_size"] in range(1, 17) and 0.5 <= values["gamma"] <= 1.0


def test_config_json_round_trip_and_clip() -> None:
    cfg = HyperparameterConfig(lr=RLParameter(1e-4, 1e-2), batch_size=RLParameter(8, 512, dtype=int))
    again = HyperparameterConfig.from_json(cfg.to_json())
    assert again.params == cfg.params
    assert cfg.params["lr"].clip(1.0) == 1e-2
    assert cfg.params["batch_size"].clip(700.4) == 512
    assert cfg.params["batch_size"].clip(8.5) == 8


def test_sampled_values_fill_the_range_log_uniformly_and_keep_their_dtype() -> None:
    lr = RLParameter(min=1e-4, max=1e-2)
    rng = np.random.default_rng(0)
    values = np.array([lr.sample(rng) for _ in range(4000)])
    assert values.min() >= 1e-4 and values.max() <= 1e-2
    # log-uniform: each decade holds half the draws (uniform would put 1% below 1e-3... 9% here)
    assert 0.45 < float(np.mean(values < 1e-3)) < 0.55
    batch = RLParameter(min=8, max=512, dtype=int)
    ints = [batch.sample(rng) for _ in range(500)]
    assert all(type(v) is int and 8 <= v <= 512 for v in ints)
    assert min(ints) < 16 and max(ints) > 256
    coef = RLParameter(min=0.0, max=0.05)  # a range from zero: uniform
    draws = np.array([coef.sample(rng) for _ in range(4000)])
    assert 0.45 < float(np.mean(draws < 0.025)) < 0.55


def test_a_population_of_samples_is_one_set_per_member_and_repeats_with_its_seed() -> None:
    cfg = HyperparameterConfig(lr_actor=RLParameter(1e-4, 1e-2),
                               batch_size=RLParameter(8, 512, dtype=int))
    first = cfg.sample(4, np.random.default_rng(7))
    assert first == cfg.sample(4, np.random.default_rng(7))
    assert len(first) == 4 and all(set(hp) == {"lr_actor", "batch_size"} for hp in first)
    assert len({hp["lr_actor"] for hp in first}) == 4


def test_an_integer_hyperparameters_range_is_an_int_range_without_being_told() -> None:
    """``learn_step: {min: 1, max: 16}`` (no dtype) loads as an int range: its mutations and
    samples are whole numbers that pass the hyperparameter's rule."""
    from distmarl.config import load_config
    from distmarl.config.hparams import check_hp_value
    from distmarl.hpo import Mutations
    from distmarl.runtime.coordinator.generations import make_hp_config

    cfg = load_config("examples/configs/tiny.yaml",
                      ["evolution.hp_config={learn_step: {min: 1, max: 16}, "
                       "lr_actor: {min: 0.0001, max: 0.01}}"])
    assert {n: p.dtype for n, p in cfg.evolution.hp_config.items()} == {
        "learn_step": "int", "lr_actor": "float"}
    hp_config = make_hp_config(cfg.evolution.hp_config, ["MADDPG"])
    mutations = Mutations(0, 0, 0, 0, 0, rl_hp=1, rand_seed=0)
    rng = np.random.default_rng(0)
    hps = [{"learn_step": 8, "lr_actor": 1e-3}] * 200
    steps = [p.detail["new"] for p in mutations.draw(hps, hp_config, rng)
             if p.detail["hp"] == "learn_step"]
    assert steps and all(type(v) is int for v in steps) and set(steps) <= {6, 10}
    for value in steps + [s["learn_step"] for s in hp_config.sample(50, rng)]:
        assert check_hp_value("MADDPG", "learn_step", value) == value


def test_a_mixed_populations_ranges_follow_their_algorithms_types() -> None:
    from distmarl.config import load_config

    cfg = load_config("examples/configs/speaker_listener_mixed.yaml",
                      ["evolution.hp_config={learn_step: {min: 1, max: 4}, "
                       "tau: {min: 0.001, max: 0.1}}"])
    assert {n: p.dtype for n, p in cfg.evolution.hp_config.items()} == {
        "learn_step": "int", "tau": "float"}


def test_a_float_range_of_an_integer_hyperparameter_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"hp_config\.learn_step: dtype float, but learn_step "
                                         r"is an integer hyperparameter of MADDPG"):
        HyperparameterConfig(learn_step=RLParameter(1, 16)).check_against("MADDPG")
    with pytest.raises(ValueError, match=r"hp_config\.lr: dtype int, but lr is a real-valued"):
        HyperparameterConfig(lr=RLParameter(1e-4, 1e-2, dtype=int)).check_against("IPPO")
    HyperparameterConfig(learn_step=RLParameter(1, 16, dtype=int)).check_against("MADDPG")
