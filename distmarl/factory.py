"""Building a run's parts from their own config sections (no Ray)."""

from __future__ import annotations

from typing import Any

from distmarl.config import AlgorithmConfig, EnvConfig, ExperimentConfig
from distmarl.types import OFF_POLICY_FIELDS


def algorithm_class(name: str) -> type:
    from distmarl import algorithms

    try:
        return getattr(algorithms, name)
    except AttributeError:
        raise ValueError(f"unknown algorithm '{name}'") from None


def env_spaces(env_cfg: EnvConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """Observation and action spaces per agent, from one probe env."""
    from distmarl.envs import make_env

    env = make_env(env_cfg.spec, **env_cfg.kwargs)
    try:
        agents = list(env.possible_agents)
        return ({a: env.observation_space(a) for a in agents},
                {a: env.action_space(a) for a in agents})
    finally:
        env.close()


def make_algorithm(cfg: AlgorithmConfig, spaces: tuple[dict[str, Any], dict[str, Any]],
                   device: str = "cpu", seed: int | None = None) -> Any:
    obs_spaces, act_spaces = spaces
    cls = algorithm_class(cfg.name)
    return cls(obs_spaces, act_spaces, cfg.net_config, hp=dict(cfg.hp), device=device, seed=seed)


def make_venv(cfg: EnvConfig, num_envs: int | None = None, seed: int | None = None,
              mode: str | None = None) -> Any:
    from distmarl.envs import make_vector_env

    return make_vector_env(cfg.spec, num_envs or cfg.num_envs, mode=mode or cfg.vector_mode,
                           seed=seed, nonfinite=cfg.nonfinite, **cfg.kwargs)


def buffer_kwargs(cfg: ExperimentConfig, agents: list[str]) -> dict[str, Any]:
    b = cfg.buffer
    return {"memory_size": b.capacity, "field_names": list(OFF_POLICY_FIELDS), "agent_ids": agents,
            "replay_ratio": b.replay_ratio, "learning_starts": b.learning_starts,
            "seed": cfg.seed, "samples_per_insert": b.samples_per_insert,
            "error_buffer": b.error_buffer}


def preflight(cfg: ExperimentConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check what only the env and the algorithm can check, before any actor starts: the env
    builds, ``algorithm.hp`` and ``evolution.hp_config`` name real hyperparameters, and the
    ``net_config`` fits the env's agents. Returns the spaces."""
    from distmarl.config import ConfigError
    from distmarl.hpo import HyperparameterConfig, RLParameter

    try:
        spaces = env_spaces(cfg.env)
    except Exception as err:  # noqa: BLE001 - any env problem is a config problem here
        raise ConfigError(f"env.spec '{cfg.env.spec}': {err}") from None
    defaults = algorithm_class(cfg.algorithm.name).DEFAULT_HP
    hp_config = HyperparameterConfig(**{n: RLParameter(p.min, p.max) for n, p in
                                        cfg.evolution.hp_config.items()})
    try:
        hp_config.check_against(cfg.algorithm.name, defaults)
        make_algorithm(cfg.algorithm, spaces, seed=cfg.seed)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"algorithm / evolution.hp_config: {err}") from None
    return spaces
