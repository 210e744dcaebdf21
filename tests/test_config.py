"""ExperimentConfig: YAML loading, --set overrides, clear errors naming field and value."""

from __future__ import annotations

import pytest
import yaml

from distmarl.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_from_dict,
    load_config,
)

# (case, config dict, words the error must contain). One row per bad input: add rows freely.
BAD_CONFIGS = [
    ("unknown top-level key", {"bufer": {}}, ["unknown key 'bufer'", "did you mean 'buffer'"]),
    ("unknown nested key", {"buffer": {"capacty": 5}}, ["buffer", "'capacty'", "did you mean 'capacity'"]),
    ("unknown deep key", {"evolution": {"mutation": {"rl_hpp": 0.1}}}, ["evolution.mutation", "did you mean 'rl_hp'"]),
    ("out of range", {"buffer": {"capacity": -1}}, ["buffer.capacity", "greater than or equal to 1", "-1"]),
    ("replay ratio 1", {"buffer": {"replay_ratio": 1.0}}, ["buffer.replay_ratio", "less than 1"]),
    ("bad algorithm", {"algorithm": {"name": "DQN"}}, ["algorithm.name", "'DQN'"]),
    ("hp bounds", {"evolution": {"hp_config": {"lr_actor": {"min": 0.1, "max": 0.01}}}},
     ["evolution.hp_config.lr_actor", "min 0.1 is greater than max 0.01"]),
    ("tournament too big", {"population": {"size": 2}, "evolution": {"tournament": {"size": 3}}},
     ["tournament.size 3 is larger than population.size 2"]),
    ("fraction gpus negative", {"resources": {"num_gpus_per_learner": -0.25}}, ["resources.num_gpus_per_learner"]),
    ("wrong type", {"population": {"size": "four"}}, ["population.size", "'four'"]),
]


@pytest.mark.parametrize("case,data,words", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_is_named(case, data, words) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, "test.yaml")
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_defaults_validate_and_every_field_has_a_description() -> None:
    cfg = ExperimentConfig()
    assert cfg.algorithm.name == "MADDPG" and cfg.population.size == 4

    def walk(model_cls, prefix=""):
        for name, field in model_cls.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, ExperimentConfig.__mro__[1]):
                yield from walk(annotation, f"{prefix}{name}.")
            elif name not in ("name", "seed") or prefix:
                yield f"{prefix}{name}", field.description

    missing = [name for name, desc in walk(ExperimentConfig) if not desc]
    assert missing == []


def test_yaml_round_trip_and_overrides(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "buffer": {"capacity": 5000}}))
    cfg = load_config(path, ["buffer.replay_ratio=0.5", "algorithm.hp.lr_actor=1e-3",
                             "env.kwargs.max_cycles=50", "population.size=2"])
    assert cfg.buffer.capacity == 5000 and cfg.buffer.replay_ratio == 0.5
    assert cfg.algorithm.hp == {"lr_actor": 1e-3}
    assert cfg.env.kwargs["max_cycles"] == 50 and cfg.population.size == 2
    again = config_from_dict(yaml.safe_load(cfg.to_yaml()))
    assert again == cfg
    assert cfg.flat()["buffer.capacity"] == 5000


def test_override_and_file_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="--set expects key=value, got 'buffer.capacity'"):
        apply_overrides({}, ["buffer.capacity"])
    with pytest.raises(ConfigError, match="'name' is not a section"):
        apply_overrides({"name": "x"}, ["name.first=1"])
    with pytest.raises(ConfigError, match="config file .*nope.yaml does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("buffer: [unclosed")
    with pytest.raises(ConfigError, match="bad.yaml is not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(scalar)
