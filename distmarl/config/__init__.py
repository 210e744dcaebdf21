"""The run's configuration: sections (:mod:`~distmarl.config.experiment`), each algorithm's typed
hyperparameters and their checker (:mod:`~distmarl.config.hparams`), and reading YAML with
``base:`` files and ``--set`` overrides (:mod:`~distmarl.config.loading`)."""

from distmarl.config.experiment import (
    ALGORITHM_CONFIGS,
    AlgorithmConfig,
    AnyAlgorithmConfig,
    BufferConfig,
    EnvConfig,
    EvolutionConfig,
    ExperimentConfig,
    IPPOConfig,
    LeagueConfig,
    MADDPGConfig,
    MAPPOConfig,
    MATD3Config,
    MutationConfig,
    PopulationConfig,
    ResourceConfig,
    RLParameterConfig,
    TournamentConfig,
    TrackingConfig,
    TrainingConfig,
    flatten_dict,
)
from distmarl.config.hparams import (
    HP_MODELS,
    Hyperparameters,
    IPPOHyperparameters,
    MADDPGHyperparameters,
    MAPPOHyperparameters,
    MATD3Hyperparameters,
    check_hp,
    check_hp_value,
    default_hp,
    hp_model,
    hp_switches,
    on_policy,
)
from distmarl.config.loading import (
    apply_overrides,
    config_from_dict,
    deep_merge,
    load_config,
    read_config_data,
    yaml_load,
)
from distmarl.config.section import ConfigError, Section

__all__ = [
    "ALGORITHM_CONFIGS", "HP_MODELS", "AlgorithmConfig", "AnyAlgorithmConfig", "BufferConfig",
    "ConfigError", "EnvConfig", "EvolutionConfig", "ExperimentConfig", "Hyperparameters",
    "IPPOConfig", "IPPOHyperparameters", "LeagueConfig", "MADDPGConfig",
    "MADDPGHyperparameters", "MAPPOConfig",
    "MAPPOHyperparameters", "MATD3Config", "MATD3Hyperparameters", "MutationConfig",
    "PopulationConfig", "RLParameterConfig", "ResourceConfig", "Section", "TournamentConfig",
    "TrackingConfig", "TrainingConfig", "apply_overrides", "check_hp", "check_hp_value",
    "config_from_dict", "deep_merge", "default_hp", "flatten_dict", "hp_model", "hp_switches",
    "load_config", "on_policy", "read_config_data", "yaml_load",
]
