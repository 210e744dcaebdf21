"""ExperimentConfig: YAML loading, ``base:`` files, --set overrides, typed hyperparameters,
clear errors naming field and value."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml

from distmarl.config import (
    ConfigError,
    ExperimentConfig,
    Section,
    apply_overrides,
    check_hp,
    check_hp_value,
    config_from_dict,
    default_hp,
    load_config,
)

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"

# (case, config dict, words the error must contain). One row per bad input: add rows freely.
BAD_CONFIGS = [
    ("unknown top-level key", {"bufer": {}}, ["unknown key 'bufer'", "did you mean 'buffer'"]),
    ("unknown nested key", {"buffer": {"capacty": 5}}, ["buffer", "'capacty'", "did you mean 'capacity'"]),
    ("unknown deep key", {"evolution": {"mutation": {"rl_hpp": 0.1}}}, ["evolution.mutation", "did you mean 'rl_hp'"]),
    ("out of range", {"buffer": {"capacity": -1}}, ["buffer.capacity", "greater than or equal to 1", "-1"]),
    ("replay ratio 1", {"replay": {"replay_ratio": 1.0}}, ["replay.replay_ratio", "less than 1"]),
    ("bad algorithm", {"algorithm": {"name": "DQN"}}, ["algorithm.name", "'DQN'"]),
    ("hp bounds", {"evolution": {"hp_config": {"lr_actor": {"min": 0.1, "max": 0.01}}}},
     ["evolution.hp_config.lr_actor", "min 0.1 is greater than max 0.01"]),
    ("tournament too big", {"population": {"size": 2}, "evolution": {"tournament": {"size": 3}}},
     ["tournament.size 3 is larger than population.size 2"]),
    ("fraction gpus negative", {"resources": {"num_gpus_per_learner": -0.25}}, ["resources.num_gpus_per_learner"]),
    ("wrong type", {"population": {"size": "four"}}, ["population.size", "'four'"]),
    ("misspelled hyperparameter", {"algorithm": {"name": "MADDPG", "hp": {"lr_actr": 1e-3}}},
     ["algorithm.hp.lr_actr: unknown key 'lr_actr'; did you mean 'lr_actor'?"]),
    ("hyperparameter of another algorithm", {"algorithm": {"name": "IPPO", "hp": {"policy_freq": 2}}},
     ["algorithm.hp.policy_freq: unknown key 'policy_freq'"]),
    ("hyperparameter out of range", {"algorithm": {"hp": {"lr_actor": -1}}},
     ["algorithm.hp.lr_actor: must be > 0 (got -1)"]),
    ("hyperparameter outside [0, 1]", {"algorithm": {"name": "IPPO", "hp": {"gae_lambda": 1.5}}},
     ["algorithm.hp.gae_lambda: must be within [0, 1] (got 1.5)"]),
    ("tau of 0", {"algorithm": {"name": "MATD3", "hp": {"tau": 0}}},
     ["algorithm.hp.tau: must be within (0, 1] (got 0)"]),
    ("int hyperparameter with a fraction", {"algorithm": {"name": "MATD3", "hp": {"policy_freq": 1.5}}},
     ["algorithm.hp.policy_freq: must be an int >= 1 (got 1.5)"]),
    ("hyperparameter of the wrong type", {"algorithm": {"name": "MAPPO", "hp": {"global_state": "yes"}}},
     ["algorithm.hp.global_state: must be true or false (got 'yes')"]),
    ("number given as a string", {"algorithm": {"hp": {"batch_size": "64"}}},
     ["algorithm.hp.batch_size: must be an int >= 1 (got '64')"]),
    ("negative optional hyperparameter", {"algorithm": {"name": "IPPO", "hp": {"target_kl": -0.1}}},
     ["algorithm.hp.target_kl: must be >= 0 or null (got -0.1)"]),
    ("two bad hyperparameters", {"algorithm": {"name": "IPPO", "hp": {"lr": 0, "update_epochs": 0}}},
     ["algorithm.hp.lr: must be > 0 (got 0)", "algorithm.hp.update_epochs: must be an int >= 1 (got 0)"]),
]


@pytest.mark.parametrize("case,data,words", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_is_named(case, data, words) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, "test.yaml")
    for word in words:
        assert word in str(err.value), (word, str(err.value))


# (an override of the tiny example, the start of the one error line it must give)
ENDS_AT_THE_ERROR = [
    ("evolution.tournament.size=5", "evolution.tournament.size 5 is larger than population.size 2"),
    ("league.sides={a: [speaker_0], b: [listener_0]}",
     "evolution.mode multi_frequency: a league copies members only within their side"),
    ("evolution.hp_config.lr_actor={min: 1, max: 0.1}",
     "evolution.hp_config.lr_actor: min 1.0 is greater than max 0.1"),
    ("population.size=0", "population.size: Input should be greater than or equal to 1 (got 0)"),
    (f"env.kwargs={[0] * 40}", "env.kwargs: Input should be a valid dictionary"),
    # a ratio of 0 once meant "stream the new rows"; a replaying learner mixes in or replays
    ("replay.replay_ratio=0", "replay.replay_ratio: Input should be greater than 0 (got 0)"),
    ("algorithm.hp.replay_ratio=0",
     "algorithm.hp.replay_ratio: must be within (0, 1) or null (got 0)"),
]


@pytest.mark.parametrize("override,line", ENDS_AT_THE_ERROR,
                         ids=[c[0][:30] for c in ENDS_AT_THE_ERROR])
def test_a_config_error_ends_at_the_error(override: str, line: str) -> None:
    """The message is the source and one line naming the field: never the config's repr (a
    check across sections gets the whole config as its input), nor a long value."""
    sets = ([override, "evolution.mode=multi_frequency", "population.size=6",
             "evolution.subpopulations=[{size: 3, evo_steps: 100}, {size: 3, evo_steps: 200}]"]
            if override.startswith("league") else [override])
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "tiny.yaml", sets)
    head, *rest = str(err.value).splitlines()
    assert head == f"invalid config {CONFIGS / 'tiny.yaml'}:"
    assert len(rest) == 1 and rest[0].startswith(f"  {line}"), rest
    assert len(rest[0]) < 200 and "Config(" not in rest[0]


def test_defaults_validate_and_every_field_has_a_description() -> None:
    cfg = ExperimentConfig()
    assert cfg.algorithm.name == "MADDPG" and cfg.population.size == 4

    def sections(annotation):
        """The sections an annotation holds: itself, or each member of a (tagged) union."""
        if isinstance(annotation, type) and issubclass(annotation, Section):
            return [annotation]
        if typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
            return [s for arg in typing.get_args(annotation) for s in sections(arg)]
        return []

    def walk(model_cls, prefix=""):
        for name, field in model_cls.model_fields.items():
            inner = sections(field.annotation)
            for section in inner:
                yield from walk(section, f"{prefix}{name}.")
            if not inner and (name not in ("name", "seed") or prefix):
                yield f"{prefix}{name}", field.description

    missing = [name for name, desc in walk(ExperimentConfig) if not desc]
    assert missing == []


def test_yaml_round_trip_and_overrides(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "buffer": {"capacity": 5000}}))
    cfg = load_config(path, ["replay.replay_ratio=0.5", "algorithm.hp.lr_actor=1e-3",
                             "env.kwargs.max_cycles=50", "population.size=2"])
    assert cfg.buffer.capacity == 5000 and cfg.replay.replay_ratio == 0.5
    assert cfg.algorithm.hp.lr_actor == 1e-3
    # a member's replay_ratio left null starts from the buffer's
    assert cfg.algorithm.hp.as_dict() == {**default_hp("MADDPG"), **PER_FILLED,
                                          "lr_actor": 1e-3, "replay_ratio": 0.5}
    assert cfg.env.kwargs["max_cycles"] == 50 and cfg.population.size == 2
    again = config_from_dict(yaml.safe_load(cfg.to_yaml()))
    assert again == cfg
    assert cfg.flat()["buffer.capacity"] == 5000


def test_override_and_file_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"--set expects key=value, got 'buffer\.capacity'"):
        apply_overrides({}, ["buffer.capacity"])
    with pytest.raises(ConfigError, match="'name' is not a section"):
        apply_overrides({"name": "x"}, ["name.first=1"])
    with pytest.raises(ConfigError, match=r"config file .*nope\.yaml does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("buffer: [unclosed")
    with pytest.raises(ConfigError, match=r"bad\.yaml is not valid YAML"):
        load_config(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("3")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(scalar)


#: The hyperparameters and defaults every algorithm has (AgileRL's names and values).
MADDPG_DEFAULTS = {"batch_size": 64, "lr_actor": 1e-3, "lr_critic": 1e-2, "learn_step": 5,
                   "gamma": 0.95, "tau": 0.01, "O_U_noise": True, "expl_noise": 0.1,
                   "mean_noise": 0.0, "theta": 0.15, "dt": 1e-2, "max_grad_norm": 0.0,
                   "actor_reg": 0.0, "replay_ratio": None, "prioritized_replay_alpha": None,
                   "prioritized_replay_beta": None}
IPPO_DEFAULTS = {"batch_size": 256, "lr": 3e-4, "learn_step": 128, "gamma": 0.99,
                 "gae_lambda": 0.95, "clip_coef": 0.2, "ent_coef": 0.01, "vf_coef": 0.5,
                 "max_grad_norm": 0.5, "update_epochs": 4, "target_kl": None, "value_norm": True}
#: What a config fills in an off-policy member's hp by default: prioritised replay's exponents
#: (the buffer replays prioritised 3-step rows for MADDPG and MATD3 unless told otherwise).
PER_FILLED = {"prioritized_replay_alpha": 0.6, "prioritized_replay_beta": 0.4}
DEFAULTS = {
    "MADDPG": MADDPG_DEFAULTS,
    "MATD3": {**MADDPG_DEFAULTS, "policy_freq": 2, "policy_noise": 0.2, "noise_clip": 0.5},
    "IPPO": IPPO_DEFAULTS,
    "MAPPO": {**IPPO_DEFAULTS, "global_state": True},
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_each_algorithm_has_its_typed_hyperparameters_with_defaults(name) -> None:
    assert default_hp(name) == DEFAULTS[name]
    cfg = config_from_dict({"algorithm": {"name": name, "hp": {"batch_size": 128.0}}})
    assert type(cfg.algorithm.hp).__name__ == f"{name}Hyperparameters"
    filled = PER_FILLED if name in ("MADDPG", "MATD3") else {}
    assert cfg.algorithm.hp.as_dict() == {**DEFAULTS[name], **filled, "batch_size": 128}
    assert isinstance(cfg.algorithm.hp.batch_size, int)
    # the coordinator receives the config as JSON and validates it again
    again = config_from_dict(json.loads(cfg.model_dump_json()))
    assert again == cfg and type(again.algorithm) is type(cfg.algorithm)


def test_algorithm_without_a_name_is_maddpg() -> None:
    cfg = config_from_dict({"algorithm": {"hp": {"lr_critic": 0.5}}})
    assert cfg.algorithm.name == "MADDPG" and cfg.algorithm.hp.lr_critic == 0.5
    assert ExperimentConfig().algorithm.hp.as_dict() == {**MADDPG_DEFAULTS, **PER_FILLED}


def test_assigning_a_bad_hyperparameter_is_refused() -> None:
    cfg = config_from_dict({"algorithm": {"name": "IPPO"}})
    cfg.algorithm.hp.lr = 1e-3
    assert cfg.algorithm.hp.lr == 1e-3
    with pytest.raises(ValueError, match="must be > 0"):
        cfg.algorithm.hp.lr = -1.0


def test_check_hp_fills_defaults_and_keeps_types() -> None:
    hp = check_hp("IPPO", {"update_epochs": 3.0, "lr": np.float32(0.5), "value_norm": np.bool_(False),
                           "target_kl": None})
    assert hp == {**IPPO_DEFAULTS, "update_epochs": 3, "lr": 0.5, "value_norm": False}
    assert type(hp["update_epochs"]) is int and type(hp["value_norm"]) is bool
    assert check_hp("MATD3", None) == DEFAULTS["MATD3"]
    assert check_hp_value("MADDPG", "batch_size", np.int64(32)) == 32


@pytest.mark.parametrize("name,key,value,message", [
    ("MADDPG", "lr_actr", 1e-3, "MADDPG has no hyperparameter 'lr_actr' (did you mean 'lr_actor'?)"),
    ("MADDPG", "policy_freq", 2, "MADDPG has no hyperparameter 'policy_freq'"),
    ("MADDPG", "batch_size", 64.5, "MADDPG hyperparameter batch_size must be an int >= 1, got 64.5"),
    ("MADDPG", "gamma", 1.5, "MADDPG hyperparameter gamma must be within [0, 1], got 1.5"),
    ("MATD3", "noise_clip", -0.1, "MATD3 hyperparameter noise_clip must be >= 0, got -0.1"),
    ("IPPO", "max_grad_norm", 0, "IPPO hyperparameter max_grad_norm must be > 0, got 0"),
    ("IPPO", "value_norm", 1, "IPPO hyperparameter value_norm must be true or false, got 1"),
    ("MAPPO", "lr", "3e-4", "MAPPO hyperparameter lr must be > 0, got '3e-4'"),
    ("MAPPO", "lr", True, "MAPPO hyperparameter lr must be > 0, got True"),
    ("DQN", "lr", 1.0, "unknown algorithm 'DQN'; known: ['IPPO', 'MADDPG', 'MAPPO', 'MATD3']"),
])
def test_check_hp_value_names_the_rule_and_the_value(name, key, value, message) -> None:
    with pytest.raises(ValueError) as err:
        check_hp_value(name, key, value)
    assert message in str(err.value), str(err.value)


# -- base: files ---------------------------------------------------------------------------

def write(path: Path, data: dict | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_base_is_deep_merged_own_keys_win_then_overrides(tmp_path) -> None:
    write(tmp_path / "shared" / "root.yaml", {
        "name": "root", "seed": 3,
        "env": {"kwargs": {"continuous_actions": True, "max_cycles": 25}, "num_envs": 4},
        "algorithm": {"name": "MATD3", "hp": {"batch_size": 32, "lr_actor": 0.01},
                      "net_config": {"encoder_config": {"hidden_size": [64, 64]}}},
        "buffer": {"capacity": 5000}})
    write(tmp_path / "shared" / "mid.yaml", {"base": "root.yaml", "buffer": {"capacity": 6000},
                                             "algorithm": {"hp": {"policy_freq": 3}}})
    child = write(tmp_path / "runs" / "child.yaml", {
        "base": "../shared/mid.yaml", "name": "child",
        "env": {"kwargs": {"max_cycles": 50}},
        "algorithm": {"hp": {"batch_size": 64},
                      "net_config": {"encoder_config": {"hidden_size": [16]}}}})
    cfg = load_config(child, ["algorithm.hp.lr_actor=0.002", "buffer.capacity=7000"])
    assert (cfg.name, cfg.seed, cfg.algorithm.name) == ("child", 3, "MATD3")
    assert cfg.env.kwargs == {"continuous_actions": True, "max_cycles": 50} and cfg.env.num_envs == 4
    assert cfg.algorithm.hp.as_dict() == {**DEFAULTS["MATD3"], **PER_FILLED, "batch_size": 64,
                                          "lr_actor": 0.002, "policy_freq": 3}
    assert cfg.algorithm.net_config == {"encoder_config": {"hidden_size": [16]}}  # lists replaced
    assert cfg.buffer.capacity == 7000
    assert load_config(tmp_path / "shared" / "mid.yaml").buffer.capacity == 6000


def test_base_that_does_not_exist_names_both_files(tmp_path) -> None:
    child = write(tmp_path / "child.yaml", {"base": "nope.yaml", "name": "x"})
    with pytest.raises(ConfigError, match=r"config file .*nope\.yaml \(the base of .*child\.yaml\) "
                                          r"does not exist"):
        load_config(child)


def test_base_cycle_names_the_files(tmp_path) -> None:
    write(tmp_path / "a.yaml", {"base": "b.yaml"})
    write(tmp_path / "b.yaml", {"base": "c.yaml"})
    write(tmp_path / "c.yaml", {"base": "a.yaml"})
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "a.yaml")
    files = [Path(p).name for p in str(err.value).split(": ", 1)[1].split(" -> ")]
    assert "cycle" in str(err.value) and files == ["a.yaml", "b.yaml", "c.yaml", "a.yaml"]
    write(tmp_path / "self.yaml", {"base": "self.yaml"})
    with pytest.raises(ConfigError, match="cycle"):
        load_config(tmp_path / "self.yaml")


def test_base_must_be_a_path_and_a_bad_base_is_named(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"list\.yaml: base must be a file path, got \['a.yaml'\]"):
        load_config(write(tmp_path / "list.yaml", {"base": ["a.yaml"]}))
    write(tmp_path / "broken.yaml", "buffer: [unclosed")
    with pytest.raises(ConfigError, match=r"broken\.yaml is not valid YAML"):
        load_config(write(tmp_path / "child.yaml", {"base": "broken.yaml"}))
    write(tmp_path / "typo.yaml", {"algorithm": {"hp": {"lr_actr": 0.1}}})
    with pytest.raises(ConfigError, match=r"child2\.yaml(.|\n)*algorithm\.hp\.lr_actr: unknown key"):
        load_config(write(tmp_path / "child2.yaml", {"base": "typo.yaml"}))


#: examples/configs/speaker_listener_maddpg_agilerl.yaml written out in full: the values the
#: base file plus the AgileRL file's differences must give.
AGILERL_IN_FULL = """
name: speaker_listener_maddpg_agilerl
seed: 42
env:
  spec: mpe2:simple_speaker_listener_v4
  kwargs: {continuous_actions: true, max_cycles: 25}
  num_envs: 8
  vector_mode: sync
algorithm:
  name: MADDPG
  hp:
    batch_size: 64
    lr_actor: 0.001
    lr_critic: 0.001
    learn_step: 16
    gamma: 0.95
    tau: 0.01
    max_grad_norm: 0.0
    actor_reg: 0.0
  net_config:
    latent_dim: 64
    encoder_config: {hidden_size: [64]}
    head_config: {hidden_size: [64]}
population: {size: 4, workers_per_member: 1}
evolution:
  mode: sync
  initial_hp: config
  evo_steps: 10000
  eval_steps: null
  eval_episodes: 1
  eval_loop: 1
  final_episodes: 100
  tournament: {size: 2, elitism: true}
  mutation:
    no_mutation: 0.2
    architecture: 0.2
    new_layer_prob: 0.2
    parameters: 0.2
    activation: 0.0
    rl_hp: 0.2
    mutation_sd: 0.1
  hp_config:
    lr_actor: {min: 0.0001, max: 0.01}
    lr_critic: {min: 0.0001, max: 0.01}
    batch_size: {min: 8, max: 512, dtype: int}
    learn_step: {min: 1, max: 16, dtype: int, grow_factor: 1.5, shrink_factor: 0.75}
buffer: {capacity: 100000, learning_starts: 1000, prioritized_replay: false, n_step: 1}
training: {max_steps_per_member: 60000, chunk_steps: 16}
resources: {num_cpus_per_learner: 1.0, num_cpus_per_worker: 1.0}
tracking: {directory: runs}
"""


def test_agilerl_example_is_its_base_plus_differences() -> None:
    path = CONFIGS / "speaker_listener_maddpg_agilerl.yaml"
    assert yaml.safe_load(path.read_text())["base"] == "speaker_listener_maddpg.yaml"
    agilerl = load_config(path)
    assert agilerl == config_from_dict(yaml.safe_load(AGILERL_IN_FULL))
    assert (agilerl.algorithm.hp.batch_size, agilerl.algorithm.hp.learn_step) == (64, 16)
    assert (agilerl.evolution.evo_steps, agilerl.evolution.eval_episodes) == (10000, 1)


@pytest.mark.parametrize("sets,words", [
    (["evolution.hp_config.lr_actr.min=0.1", "evolution.hp_config.lr_actr.max=1"],
     ["evolution.hp_config", "['lr_actr'] are not hyperparameters of MADDPG"]),
    (["evolution.hp_config.O_U_noise.min=0", "evolution.hp_config.O_U_noise.max=1"],
     ["evolution.hp_config", "['O_U_noise'] of MADDPG are on/off switches"]),
    (["evolution.hp_config.gamma.min=0.5", "evolution.hp_config.gamma.max=1.5"],
     ["evolution.hp_config", "search range [0.5, 1.5] of gamma", "got 1.5"]),
])
def test_search_ranges_are_checked_when_the_config_loads(sets, words) -> None:
    """A search range for a hyperparameter the algorithm lacks, for an on/off switch, or
    outside the hyperparameter's rule fails at load, before any env is built."""
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "tiny.yaml", sets)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_a_league_with_named_sides_has_a_population_per_side() -> None:
    from distmarl.config import load_config

    tiny = "examples/configs/tiny.yaml"
    assert load_config(tiny).num_members == load_config(tiny).population.size
    sides = load_config(tiny, ["population.size=3",
                               "league.sides={speakers: [speaker], listeners: [listener]}"])
    assert sides.num_members == 6 and sides.league.enabled
    assert load_config(tiny, ["population.size=3", "league.symmetric=true"]).num_members == 3


def test_league_opponents_are_a_list_of_sources_set_as_a_yaml_flow_list() -> None:
    """Left out: half current members, half snapshots (hard PFSP); ``--set`` takes a YAML flow
    list; shares summing to 1 within 1e-6 pass, further off they fail naming the list; the
    knobs the list replaces are unknown keys."""
    tiny = CONFIGS / "tiny.yaml"
    default = load_config(tiny).league.opponents
    assert [(o.source, o.share, o.weighting) for o in default] == [("current", 0.5, "hard"),
                                                                   ("snapshot", 0.5, "hard")]
    cfg = load_config(tiny, ["league.opponents=[{source: reference, share: 0.3}, "
                             "{source: current, share: 0.6, weighting: variance}, "
                             "{source: snapshot, share: 0.1, weighting: uniform}]"])
    assert [(o.source, o.share, o.weighting) for o in cfg.league.opponents] == [
        ("reference", 0.3, "hard"), ("current", 0.6, "variance"), ("snapshot", 0.1, "uniform")]
    assert sum(o.share for o in cfg.league.opponents) != 1.0  # 0.3 + 0.6 + 0.1 in floats
    with pytest.raises(ConfigError, match=r"league\.opponents: the shares sum to 1\.00001"):
        load_config(tiny, ["league.opponents=[{source: current, share: 0.50001}, "
                           "{source: snapshot, share: 0.5}]"])
    for knob in ("current_share", "reference_share", "pfsp", "reference_pfsp", "self_share"):
        with pytest.raises(ConfigError, match=rf"league\.{knob}: unknown key '{knob}'"):
            load_config(tiny, [f"league.{knob}=0.5"])


@pytest.mark.parametrize("name", ["MADDPG", "MATD3"])
def test_replaying_members_get_a_replay_section_with_its_defaults(name: str) -> None:
    cfg = config_from_dict({"algorithm": {"name": name}})
    assert cfg.replay is not None and (cfg.replay.n_step, cfg.replay.prioritized_replay) == (
        3, True)
    assert cfg.row_steps == 3
    uniform = config_from_dict({"algorithm": {"name": name},
                                "replay": {"n_step": 1, "prioritized_replay": False}})
    assert uniform.replay is not None and uniform.replay.prioritized is None
    assert uniform.row_steps == 1
    # what a saved config holds: loading it again changes nothing
    assert config_from_dict(json.loads(cfg.model_dump_json())) == cfg


@pytest.mark.parametrize("name", ["IPPO", "MAPPO"])
def test_members_that_read_their_own_fragments_have_no_replay_section(name: str) -> None:
    cfg = config_from_dict({"algorithm": {"name": name}})
    assert cfg.replay is None and cfg.row_steps == 1
    assert config_from_dict(json.loads(cfg.model_dump_json())) == cfg
    with pytest.raises(ConfigError, match=rf"replay: {name} members read their own fragments "
                                          "once, in order: they have no replay settings"):
        config_from_dict({"algorithm": {"name": name}, "replay": {"n_step": 3}})


def test_switching_to_an_on_policy_algorithm_leaves_the_base_s_replay_section_out() -> None:
    """``tiny.yaml`` (MADDPG) sets ``replay.learning_starts``; run as IPPO by ``--set`` it
    loads without a replay section, and one given in the same ``--set`` is still refused."""
    tiny = CONFIGS / "tiny.yaml"
    assert load_config(tiny).replay is not None
    as_ippo = ["algorithm.name=IPPO", "algorithm.hp={learn_step: 4}", "evolution.hp_config={}"]
    assert load_config(tiny, as_ippo).replay is None
    with pytest.raises(ConfigError, match="replay: IPPO members read their own fragments"):
        load_config(tiny, [*as_ippo, "replay.n_step=2"])


def test_a_replay_key_written_where_it_was_is_read_where_it_is() -> None:
    """``buffer.n_step`` and the others moved to ``replay``: read there, with a warning that
    says where; both at once is an error naming them."""
    from distmarl.config import MovedKeyWarning

    with pytest.warns(MovedKeyWarning, match="'buffer.n_step' is now 'replay.n_step'"):
        cfg = config_from_dict({"buffer": {"n_step": 1, "capacity": 500},
                                "training": {"learning_delay": 7}})
    assert cfg.replay is not None and (cfg.replay.n_step, cfg.replay.learning_delay) == (1, 7)
    assert cfg.buffer.capacity == 500
    with pytest.raises(ConfigError, match=r"'buffer\.n_step' moved to 'replay.n_step', and both "
                                          "are set"):
        config_from_dict({"buffer": {"n_step": 1}, "replay": {"n_step": 2}})


def test_old_replay_keys_of_members_without_replay() -> None:
    """IPPO read and ignored ``training.learning_delay`` / ``max_policy_lag``: they are
    dropped with a warning that says so. A null at the old place meant the family's default,
    which the replay section has."""
    from distmarl.config import ForeignKeyWarning, MovedKeyWarning

    with pytest.warns(ForeignKeyWarning, match="'training.max_policy_lag' .now "
                                               "'replay.max_policy_lag'. does nothing for IPPO"):
        cfg = config_from_dict({"algorithm": {"name": "IPPO"},
                                "training": {"max_policy_lag": 2, "chunk_steps": 8}})
    assert cfg.replay is None and cfg.training.chunk_steps == 8
    with pytest.warns(MovedKeyWarning):
        cfg = config_from_dict({"buffer": {"n_step": None, "prioritized_replay": None}})
    assert cfg.replay is not None and (cfg.replay.n_step, cfg.replay.prioritized_replay) == (
        3, True)


def test_a_mixed_population_takes_its_family_s_replay_defaults() -> None:
    cfg = config_from_dict({"population": {"size": 4, "members": [
        {"algorithm": "MADDPG", "count": 2}, {"algorithm": "MATD3", "count": 2}]}})
    assert cfg.replay is not None
    assert (cfg.replay.n_step, cfg.replay.prioritized_replay) == (3, True)


@pytest.mark.parametrize("value,why", [("0", "greater than or equal to 1 (got 0)"),
                                        ("many", "unable to parse string as an integer (got "
                                                 "'many')")])
def test_members_per_learner_is_a_positive_number_or_auto(value: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "tiny.yaml", [f"population.members_per_learner={value}"])
    assert "population.members_per_learner.constrained-int: Input should be" in str(err.value)
    assert why in str(err.value) and "should be 'auto'" in str(err.value)
    for ok, want in (("auto", "auto"), ("3", 3)):
        cfg = load_config(CONFIGS / "tiny.yaml", [f"population.members_per_learner={ok}"])
        assert cfg.population.members_per_learner == want


def test_agilerl_spellings_are_told_what_distmarl_calls_them() -> None:
    """AgileRL's single ``lr`` for MADDPG / MATD3 is refused naming the two learning rates,
    in the hyperparameters and in the search ranges; ``docs/from_agilerl.md``'s ranges load,
    the integer one drawing integers without ``dtype``."""
    import re

    from distmarl.config import ConfigError

    tiny = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"
    for override in ("algorithm.hp.lr=0.001", "evolution.hp_config={lr: {min: 0.001, max: 0.1}}"):
        with pytest.raises(ConfigError, match="set lr_actor and lr_critic"):
            load_config(tiny, [override])
    page = (Path(__file__).resolve().parents[1] / "docs" / "from_agilerl.md").read_text()
    [snippet] = re.findall(r"```yaml\n(.*?)```", page, re.S)
    ranges = yaml.safe_load(snippet)["evolution"]["hp_config"]
    cfg = load_config(tiny, [f"evolution.hp_config={json.dumps(ranges)}"])
    assert cfg.evolution.hp_config["batch_size"].dtype == "int"
    assert cfg.evolution.hp_config["lr_actor"].dtype == "float"


def test_the_old_name_of_max_steps_per_member_is_read_with_a_warning() -> None:
    """``training.max_steps`` (its old name) still sets each member's env steps, saying the new
    name; both names at once are an error naming them; a stored config of the old name loads."""
    from distmarl.config import ConfigError
    from distmarl.config.section import RenamedKeyWarning
    from distmarl.config.stored import stored_config

    tiny = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"
    with pytest.warns(RenamedKeyWarning, match="'max_steps' is now 'max_steps_per_member'"):
        cfg = load_config(tiny, ["training={max_steps: 1234}"])
    assert cfg.training.max_steps_per_member == 1234
    with pytest.raises(ConfigError, match="'max_steps' is the old name of "
                                          "'max_steps_per_member', and both are set"):
        load_config(tiny, ["training={max_steps: 1, max_steps_per_member: 2}"])
    old = json.loads(load_config(tiny).model_dump_json())
    old["training"]["max_steps"] = old["training"].pop("max_steps_per_member")
    with pytest.warns(RenamedKeyWarning):
        assert stored_config(old).training.max_steps_per_member == 800


def test_each_evolution_mode_has_only_its_own_keys() -> None:
    """A key of another mode beside the mode is dropped with a warning naming the modes that
    read it; switching the mode by --set (or in a file over its base) leaves the old mode's
    keys out quietly; an unknown mode names the known ones."""
    import warnings

    from distmarl.config import AsyncEvolution, ForeignKeyWarning, SyncEvolution

    assert isinstance(load_config(CONFIGS / "tiny.yaml").evolution, SyncEvolution)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        switched = load_config(CONFIGS / "tiny.yaml", ["evolution.mode=async", "evolution.top_frac=0.5"])
    assert isinstance(switched.evolution, AsyncEvolution) and switched.evolution.top_frac == 0.5
    assert "tournament" not in json.loads(switched.model_dump_json())["evolution"]
    with pytest.warns(ForeignKeyWarning, match="'top_frac' is a key of evolution.mode async "
                                               "and multi_frequency, which mode sync does not"):
        plain = load_config(CONFIGS / "tiny.yaml", ["evolution.top_frac=0.5"])
    assert not hasattr(plain.evolution, "top_frac")
    with pytest.raises(ConfigError, match=r"evolution\.mode: unknown evolution mode 'pbt'; "
                                          r"choose one of \['async', 'independent', "
                                          r"'multi_frequency', 'sync'\]"):
        load_config(CONFIGS / "tiny.yaml", ["evolution.mode=pbt"])
