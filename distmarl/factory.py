"""Building a run's parts from their own config sections (no Ray).

The algorithm's family (:func:`distmarl.config.on_policy`, in the run's
:class:`~distmarl.types.RolloutSpec`) decides the data path: off-policy members (MADDPG, MATD3) store ``OFF_POLICY_FIELDS`` and replay them; on-policy
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
from distmarl.config.hparams import on_policy
from distmarl.config.replay import FRAGMENT_CAPACITY_MARGIN
from distmarl.types import RolloutSpec


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
                   seed: int | None = None, learner: bool = True) -> Algorithm:
    """The algorithm of ``cfg`` for ``spaces`` (``(observation, action)`` per agent, or an
    :class:`EnvSpaces`, whose state space goes to an algorithm that reads one: MAPPO);
    ``learner=False``: its policy, which only acts (:class:`Algorithm`)."""
    obs_spaces, act_spaces = spaces[0], spaces[1]
    cls = algorithm_class(cfg.name)
    hp, state_space = cfg.hp.as_dict(), _state_space(spaces)
    extra = ({"state_space": state_space}
             if cls.rollout_spec(hp, state_space).global_state else {})
    return cls(obs_spaces, act_spaces, cfg.net_config, hp=hp, device=device, seed=seed,
               learner=learner, **extra)


def _state_space(spaces: tuple[Any, ...]) -> Any:
    return spaces[2] if len(spaces) > 2 else None


def rollout_spec(cfg: ExperimentConfig, spaces: tuple[Any, ...]) -> RolloutSpec:
    """What the rollouts of ``cfg``'s run record: its family, the env's global state where any
    member's algorithm reads it (``spaces[2]``: the env's state space; the buffer's rows are
    shared, so every member's rows carry it then), and ``replay.n_step``."""
    state_space = _state_space(spaces)
    global_state = any(algorithm_class(a.name).rollout_spec(a.hp.as_dict(), state_space)
                       .global_state for a in cfg.member_algorithm_configs())
    return RolloutSpec(on_policy(cfg.algorithm.name), global_state, cfg.row_steps)


def converted(cfg: AlgorithmConfig, name: str, hp: Mapping[str, Any] | None = None
              ) -> AlgorithmConfig:
    """``cfg``'s networks for algorithm ``name`` with ``hp`` (None: its defaults): what a member
    that takes another algorithm's state is rebuilt from before it loads the state (which
    brings its own architecture and hyperparameters)."""
    return ALGORITHM_CONFIGS[name].model_validate(
        {"name": name, "hp": dict(hp or {}), "net_config": cfg.net_config})


def make_venv(cfg: EnvConfig, num_envs: int | None = None, seed: int | None = None,
              mode: str | None = None, global_state: bool = False) -> Any:
    """The vector env of ``cfg`` (``global_state``: with each sub-env's ``env.state()``)."""
    from distmarl.envs import make_vector_env, parse_wrappers

    return make_vector_env(cfg.spec, num_envs or cfg.num_envs, mode=mode or cfg.vector_mode,
                           seed=seed, nonfinite=cfg.nonfinite, global_state=global_state,
                           wrappers=parse_wrappers(cfg.wrappers),
                           max_episode_steps=cfg.max_episode_steps, **cfg.kwargs)


def check_on_policy_buffer(cfg: ExperimentConfig) -> None:
    """ValueError (naming the field) when the buffer cannot carry an on-policy population's
    fragments: a ``capacity`` below :data:`FRAGMENT_CAPACITY_MARGIN` times the rows that can
    wait unread (per member, one fragment per worker plus one, of the largest ``learn_step``
    mutation may reach). (A rate limit, which would stall them, is a replay setting they
    have none of.)"""
    if not on_policy(cfg.algorithm.name):
        return
    b = cfg.buffer
    waiting = cfg.fragment_rows()
    if b.capacity < waiting.capacity:
        raise ValueError(f"buffer.capacity {b.capacity} is too small for {cfg.algorithm.name}: "
                         f"{waiting.fragments} fragments of up to {waiting.steps} steps * "
                         f"{waiting.num_envs} envs can wait unread; use at least "
                         f"{waiting.capacity} (or leave buffer.capacity out)")


def check_buffer_memory(cfg: ExperimentConfig, spaces: EnvSpaces,
                        memory: int | None = None) -> None:
    """ValueError when ``buffer.capacity`` rows of the env's transitions (as the members store
    them, see :func:`distmarl.envs.footprint.row_bytes`) exceed ``memory`` bytes (default:
    this machine's): the buffer would fill lazily until the machine runs out of memory."""
    from distmarl.envs.footprint import buffer_memory_problem, machine_memory, row_bytes

    spec = rollout_spec(cfg, spaces)
    nbytes = row_bytes(spec.fields, spaces.observation, spaces.action,
                       spaces.state if spec.global_state else None, cfg.row_steps)
    problem = buffer_memory_problem(cfg.buffer.capacity, nbytes,
                                    machine_memory() if memory is None else memory,
                                    len(spaces.observation))
    if problem is None:
        return
    if spec.on_policy:
        w = cfg.fragment_rows()
        problem += (f"; {cfg.algorithm.name} needs {w.capacity} rows ({FRAGMENT_CAPACITY_MARGIN} "
                    f"x {w.fragments} fragments of {w.steps} steps x {w.num_envs} envs): lower "
                    "algorithm.hp.learn_step, env.num_envs or population.workers_per_member")
    raise ValueError(problem)


def buffer_kwargs(cfg: ExperimentConfig, agents: list[str], spec: RolloutSpec
                  ) -> dict[str, Any]:
    """The buffer actor's arguments, for rows as ``spec`` says (:func:`rollout_spec`),
    without ``learning_starts``: a run's learners are granted updates only once the buffer
    holds that many rows (:mod:`distmarl.buffers.grants`), and an on-policy fragment is
    learned as soon as it arrives. On-policy runs are checked by
    :func:`check_on_policy_buffer`."""
    check_on_policy_buffer(cfg)
    out: dict[str, Any] = {"memory_size": cfg.buffer.capacity,
                           "field_names": list(spec.buffer_fields), "agent_ids": agents,
                           "seed": cfg.seed, "learning_starts": 0}
    r = cfg.replay
    if r is not None:
        out |= {"replay_ratio": r.replay_ratio,
                "samples_per_insert": r.samples_per_insert, "error_buffer": r.error_buffer,
                "prioritized": r.prioritized}
    return out


class CompetitiveGameWarning(UserWarning):
    """A game that looks competitive runs without a ``league:`` section (see
    :mod:`distmarl.envs.competitive`)."""


class StepLimitWarning(UserWarning):
    """An env with no episode limit of its own, and no board to fit one to, runs with the
    default limit (see :mod:`distmarl.envs.limits`)."""


def preflight(cfg: ExperimentConfig) -> EnvSpaces:
    """Check what only the env and the algorithm can check, before any actor starts: the env
    builds, resets and takes random legal steps (:class:`~distmarl.envs.probe.ProbeRun`, in a
    child process that runs while the algorithm builds), the algorithm builds for its spaces
    (the ``net_config`` fits the env's agents), and an on-policy population's buffer can carry
    its fragments. (Hyperparameters and their search ranges are checked when the config
    loads.) Warns (:class:`CompetitiveGameWarning`) when the game looks competitive and the
    config has no ``league:`` section, and (:class:`StepLimitWarning`) when its episodes
    get the default step limit. Returns the spaces."""
    from distmarl.config import ConfigError
    from distmarl.envs import EnvSpecError, parse_wrappers
    from distmarl.envs.errors import spec_reason
    from distmarl.envs.probe import PROBE_STEPS, ProbeRun

    spec = cfg.env.spec
    try:
        parse_wrappers(cfg.env.wrappers)
    except EnvSpecError as err:
        raise ConfigError(str(err)) from None
    try:
        spaces = env_spaces(cfg.env)
    except Exception as err:
        raise ConfigError(f"env.spec {spec!r}: {spec_reason(err, spec)}") from None
    # a league already rates the game: one step shows the env works
    run = ProbeRun(spec, cfg.env.kwargs, cfg.env.wrappers, cfg.seed,
                   steps=1 if cfg.league.enabled else PROBE_STEPS)
    try:
        problem = _algorithm_problem(cfg, spaces)
    except BaseException:
        run.cancel()
        raise
    report = _probe_result(run, spec)
    if problem is not None:
        raise ConfigError(problem)
    if not cfg.league.enabled:
        _warn_if_competitive(spec, report)
    _warn_if_default_limit(cfg.env)
    return spaces


def _algorithm_problem(cfg: ExperimentConfig, spaces: EnvSpaces) -> str | None:
    """What stops the algorithm or the on-policy buffer from fitting the env, or None."""
    try:
        for algorithm in {a.name: a for a in cfg.member_algorithm_configs()}.values():
            make_algorithm(algorithm, spaces, seed=cfg.seed)
    except (ValueError, KeyError, TypeError) as err:
        return f"algorithm: {err}"
    try:
        check_on_policy_buffer(cfg)
        check_buffer_memory(cfg, spaces)
    except ValueError as err:
        return str(err)
    return None


def _probe_result(run: Any, spec: str) -> Any:
    """The probe's report; ConfigError naming the spec and the phase when the env failed."""
    from distmarl.config import ConfigError
    from distmarl.envs.probe import EnvProbeError

    try:
        return run.result()
    except EnvProbeError as err:
        raise ConfigError(f"env.spec {spec!r}: {err}") from None


def _warn_if_competitive(spec: str, report: Any) -> None:
    import warnings

    from distmarl.envs.competitive import competitive_warning

    message = competitive_warning(spec, report)
    if message is not None:
        warnings.warn(message, CompetitiveGameWarning, stacklevel=3)


def _warn_if_default_limit(env_cfg: EnvConfig) -> None:
    """Warn when ``env.max_episode_steps: auto`` leaves the env with the default step limit
    (:func:`~distmarl.envs.limits.default_limit_note`)."""
    import warnings

    from distmarl.envs import make_env, parse_wrappers
    from distmarl.envs.limits import default_limit_note

    env = make_env(env_cfg.spec, wrappers=parse_wrappers(env_cfg.wrappers), **env_cfg.kwargs)
    try:
        note = default_limit_note(env_cfg.max_episode_steps, env)
    finally:
        env.close()
    if note is not None:
        warnings.warn(note, StepLimitWarning, stacklevel=3)
