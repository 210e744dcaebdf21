"""Building a run's parts from their own config sections (no Ray).

The algorithm's family (:attr:`~distmarl.algorithms.Algorithm.on_policy`) decides the data
path: off-policy members (MADDPG, MATD3) store ``OFF_POLICY_FIELDS`` and replay them; on-policy
members (IPPO, MAPPO) store ``ON_POLICY_FIELDS`` in whole rollout fragments that their own learner reads once
(:mod:`distmarl.runtime.actors.fragments`), so for them the buffer has no ``learning_starts`` and no
rate limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from distmarl.algorithms import Algorithm
from distmarl.algorithms.registry import algorithm_class
from distmarl.config import ALGORITHM_CONFIGS, AlgorithmConfig, EnvConfig, ExperimentConfig
from distmarl.types import N_STEPS_FIELD

#: A buffer holds at least this many times the fragments an on-policy population can have
#: waiting at once (see :func:`check_on_policy_buffer`).
FRAGMENT_CAPACITY_MARGIN = 2


class EnvSpaces(NamedTuple):
    """An env's spaces: per agent, and its global state's (``env.state_space``, a Box) or None
    when it has none. ``obs, act = spaces[:2]`` for the per-agent ones."""

    observation: dict[str, Any]
    action: dict[str, Any]
    state: Any = None


def env_spaces(env_cfg: EnvConfig) -> EnvSpaces:
    """Observation and action spaces per agent and the global state's space, from one probe
    env."""
    from gymnasium import spaces

    from distmarl.envs import make_env, parse_wrappers

    env = make_env(env_cfg.spec, wrappers=parse_wrappers(env_cfg.wrappers), **env_cfg.kwargs)
    try:
        agents = list(env.possible_agents)
        state = getattr(env, "state_space", None)
        return EnvSpaces({a: env.observation_space(a) for a in agents},
                         {a: env.action_space(a) for a in agents},
                         state if isinstance(state, spaces.Box) else None)
    finally:
        env.close()


def make_algorithm(cfg: AlgorithmConfig, spaces: tuple[Any, ...], device: str = "cpu",
                   seed: int | None = None) -> Algorithm:
    """The algorithm of ``cfg`` for ``spaces`` (``(observation, action)`` per agent, or an
    :class:`EnvSpaces`, whose state space goes to an algorithm that reads one: MAPPO)."""
    obs_spaces, act_spaces = spaces[0], spaces[1]
    cls = algorithm_class(cfg.name)
    extra: dict[str, Any] = {}
    if cls.reads_state:
        extra["state_space"] = spaces[2] if len(spaces) > 2 else None
    return cls(obs_spaces, act_spaces, cfg.net_config, hp=cfg.hp.as_dict(), device=device, seed=seed,
               **extra)


def converted(cfg: AlgorithmConfig, name: str, hp: Mapping[str, Any] | None = None
              ) -> AlgorithmConfig:
    """``cfg``'s networks for algorithm ``name`` with ``hp`` (None: its defaults): what a member
    that takes another algorithm's state is rebuilt from before it loads the state (which
    brings its own architecture and hyperparameters)."""
    return ALGORITHM_CONFIGS[name].model_validate(
        {"name": name, "hp": dict(hp or {}), "net_config": cfg.net_config})


def make_venv(cfg: EnvConfig, num_envs: int | None = None, seed: int | None = None,
              mode: str | None = None, record_state: bool = False) -> Any:
    """The vector env of ``cfg`` (``record_state``: with each sub-env's ``env.state()``)."""
    from distmarl.envs import make_vector_env, parse_wrappers

    return make_vector_env(cfg.spec, num_envs or cfg.num_envs, mode=mode or cfg.vector_mode,
                           seed=seed, nonfinite=cfg.nonfinite, record_state=record_state,
                           wrappers=parse_wrappers(cfg.wrappers), **cfg.kwargs)


def is_on_policy(name: str) -> bool:
    """Whether algorithm ``name`` learns on-policy (from whole fragments of its own rollouts)."""
    return algorithm_class(name).on_policy


def buffer_fields(name: str, global_state: bool = False) -> tuple[str, ...]:
    """The transition fields that members of algorithm ``name`` store, in buffer order
    (``global_state``: their value networks read the env's state, see :func:`reads_state`)."""
    return algorithm_class(name).buffer_fields(global_state)


def reads_state(cfg: AlgorithmConfig, spaces: tuple[Any, ...]) -> bool:
    """Whether members of ``cfg`` read the env's global state: an algorithm that can (MAPPO),
    with ``hp["global_state"]`` on, on an env with a state space (``spaces[2]``)."""
    state_space = spaces[2] if len(spaces) > 2 else None
    return algorithm_class(cfg.name).reads_state_with(cfg.hp.as_dict(), state_space)


def initial_learn_step(cfg: ExperimentConfig) -> int:
    """The configured ``learn_step`` (``algorithm.hp``, whose default is the algorithm's)."""
    return cfg.algorithm.hp.learn_step


def check_on_policy_buffer(cfg: ExperimentConfig) -> None:
    """ValueError (naming the field) when the buffer config cannot carry an on-policy
    population's fragments: a rate limit (each row is read exactly once, so a
    ``samples_per_insert`` limit would stall writers or readers), or a ``capacity`` below
    :data:`FRAGMENT_CAPACITY_MARGIN` times the rows that can wait unread (per member, one
    fragment per worker plus one, of the largest ``learn_step`` mutation may reach)."""
    if not is_on_policy(cfg.algorithm.name):
        return
    b = cfg.buffer
    if b.samples_per_insert is not None:
        raise ValueError(f"buffer.samples_per_insert must be null for the on-policy algorithm "
                         f"{cfg.algorithm.name} (each row is read exactly once), got "
                         f"{b.samples_per_insert}")
    steps = initial_learn_step(cfg)
    searched = cfg.evolution.hp_config.get("learn_step")
    if searched is not None:
        steps = max(steps, int(searched.max))
    waiting = cfg.num_members * (cfg.population.workers_per_member + 1)
    needed = FRAGMENT_CAPACITY_MARGIN * waiting * steps * cfg.env.num_envs
    if b.capacity < needed:
        raise ValueError(f"buffer.capacity {b.capacity} is too small for {cfg.algorithm.name}: "
                         f"{waiting} fragments of up to {steps} steps * {cfg.env.num_envs} envs "
                         f"can wait unread; use at least {needed}")


def buffer_kwargs(cfg: ExperimentConfig, agents: list[str],
                  global_state: bool = False) -> dict[str, Any]:
    """The buffer actor's arguments. On-policy runs get their fields (with
    :data:`~distmarl.types.STATE_FIELDS` when ``global_state``, see :func:`reads_state`), no
    ``learning_starts`` (a fragment is learned as soon as it arrives) and are checked by
    :func:`check_on_policy_buffer`."""
    b = cfg.buffer
    on_policy = is_on_policy(cfg.algorithm.name)
    check_on_policy_buffer(cfg)
    fields = list(buffer_fields(cfg.algorithm.name, global_state))
    if b.row_steps > 1:
        fields.append(N_STEPS_FIELD)
    return {"memory_size": b.capacity, "field_names": fields,
            "agent_ids": agents, "replay_ratio": b.replay_ratio,
            "learning_starts": 0 if on_policy else b.learning_starts,
            "seed": cfg.seed, "samples_per_insert": b.samples_per_insert,
            "error_buffer": b.error_buffer, "prioritized": b.prioritized}


def preflight(cfg: ExperimentConfig) -> EnvSpaces:
    """Check what only the env and the algorithm can check, before any actor starts: the env
    builds, the algorithm builds for its spaces (the ``net_config`` fits the env's agents),
    and an on-policy population's buffer can carry its fragments. (Hyperparameters and their
    search ranges are checked when the config loads.) Returns the spaces."""
    from distmarl.config import ConfigError
    from distmarl.envs import EnvSpecError, parse_wrappers

    try:
        parse_wrappers(cfg.env.wrappers)
    except EnvSpecError as err:
        raise ConfigError(str(err)) from None
    try:
        spaces = env_spaces(cfg.env)
    except Exception as err:
        raise ConfigError(f"env.spec '{cfg.env.spec}': {err}") from None
    try:
        for algorithm in {a.name: a for a in cfg.member_algorithm_configs()}.values():
            make_algorithm(algorithm, spaces, seed=cfg.seed)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"algorithm: {err}") from None
    try:
        check_on_policy_buffer(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return spaces
