"""Env preprocessing from config, through SuperSuit (PettingZoo's companion library).

``env.wrappers`` is a list applied in order to every sub-env, each entry a wrapper name (no
arguments), ``{name: value}`` (one positional argument after the env), ``{name: [values]}``
or ``{name: {argument: value}}``::

    wrappers:
      - {color_reduction: {mode: B}}
      - {resize: {x_size: 64, y_size: 64}}
      - {frame_stack: 4}

Names are SuperSuit's without the version suffix (``resize`` is ``resize_v1``); the exact
SuperSuit name is accepted too. An unknown wrapper, an unknown or missing argument is a
:class:`~distmarl.envs.errors.EnvSpecError` naming the entry, before any env is built.
YAML has no tuples: a list given for an argument SuperSuit checks to be a tuple
(:data:`TUPLE_ARGUMENTS`: ``reshape``'s ``shape``, ``frame_skip``'s ``(low, high)`` range) is
passed as one, so ``{reshape: {shape: [24, 96]}}`` and ``{frame_skip: {num_frames: [2, 4]}}``
(each step repeats the action 2 to 4 frames, SuperSuit's parallel ``frame_skip``) work from a
config; ``{frame_skip: [2, 4]}`` is refused, since it would mean ``num_frames=2,
default_action=4``.

Frames stay ``uint8`` through ``color_reduction``, ``resize`` and ``frame_stack``; the CNN
scales them once, so ``dtype`` and ``normalize_obs`` are rarely wanted (they make every stored
frame four times larger).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pettingzoo.utils.env import ParallelEnv

from distmarl.envs.errors import EnvSpecError, MissingPackageError
from distmarl.envs.parallel_obs import direct

#: config name -> SuperSuit function (the wrappers that take plain data and apply to parallel
#: envs; lambdas and vector-env converters are left out).
WRAPPERS: dict[str, str] = {
    "color_reduction": "color_reduction_v0",
    "resize": "resize_v1",
    "frame_stack": "frame_stack_v1",
    "frame_stack_v2": "frame_stack_v2",
    "frame_skip": "frame_skip_v0",
    "max_observation": "max_observation_v0",
    "dtype": "dtype_v0",
    "normalize_obs": "normalize_obs_v0",
    "flatten": "flatten_v0",
    "reshape": "reshape_v0",
    "clip_reward": "clip_reward_v0",
    "clip_actions": "clip_actions_v0",
    "scale_actions": "scale_actions_v0",
    "sticky_actions": "sticky_actions_v0",
    "delay_observations": "delay_observations_v0",
    "black_death": "black_death_v3",
    "agent_indicator": "agent_indicator_v0",
    "pad_observations": "pad_observations_v0",
    "pad_action_space": "pad_action_space_v0",
}
_BY_FUNCTION = {v: k for k, v in WRAPPERS.items()}

#: SuperSuit function -> the arguments it asserts to be tuples (``isinstance(x, tuple)``).
#: Lists from a config are converted to tuples for these, and only these.
TUPLE_ARGUMENTS: dict[str, frozenset[str]] = {
    "reshape_v0": frozenset({"shape"}),
    "frame_skip_v0": frozenset({"num_frames"}),
}


@dataclass(frozen=True)
class WrapperSpec:
    """One parsed wrapper: its SuperSuit function and arguments (plain data, picklable)."""

    name: str
    function: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def apply(self, env: ParallelEnv) -> ParallelEnv:
        """``env`` wrapped; SuperSuit's own complaints name this wrapper. Observation
        wrappers step the parallel env directly (:mod:`~distmarl.envs.parallel_obs`)."""
        fn = _supersuit_function(self.function)
        try:
            return direct(fn(env, *self.args, **dict(self.kwargs)))
        except (AssertionError, ValueError, TypeError) as exc:
            raise EnvSpecError(f"env wrapper {self.name} ({self.function}) refused the env "
                               f"{_spaces(env)}: {exc or type(exc).__name__}") from exc


def parse_wrappers(entries: Sequence[str | Mapping[str, Any]] | None) -> tuple[WrapperSpec, ...]:
    """Check ``env.wrappers`` entries (see the module docstring) and return them parsed."""
    return tuple(_parse(i, e) for i, e in enumerate(entries or ()))


def apply_wrappers(env: ParallelEnv, specs: Sequence[WrapperSpec]) -> ParallelEnv:
    """``env`` with each wrapper applied in order."""
    for spec in specs:
        env = spec.apply(env)
    return env


def _parse(i: int, entry: str | Mapping[str, Any]) -> WrapperSpec:
    where = f"env.wrappers[{i}]"
    if isinstance(entry, str):
        name, value = entry, None
    elif isinstance(entry, Mapping) and len(entry) == 1:
        name, value = next(iter(entry.items()))
    else:
        raise EnvSpecError(f"{where} must be a wrapper name or {{name: arguments}} with one "
                           f"name, got {entry!r}")
    function = WRAPPERS.get(name) or (name if name in _BY_FUNCTION else None)
    if function is None:
        close = difflib.get_close_matches(str(name), list(WRAPPERS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise EnvSpecError(f"{where}: unknown wrapper {name!r}{hint} Known: {sorted(WRAPPERS)}")
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(value, Mapping):
        kwargs = dict(value)
    elif isinstance(value, (list, tuple)):
        args = tuple(value)
    elif value is not None:
        args = (value,)
    _check_arguments(where, str(name), function, args, kwargs)
    if function == "frame_skip_v0" and len(args) == 2:
        raise EnvSpecError(f"{where} {name}: [{args[0]!r}, {args[1]!r}] would be num_frames="
                           f"{args[0]!r}, default_action={args[1]!r}; write a range as "
                           f"{{{name}: {{num_frames: [{args[0]!r}, {args[1]!r}]}}}}")
    args, kwargs = _as_tuples(function, args, kwargs)
    return WrapperSpec(str(name), function, args, tuple(sorted(kwargs.items())))


def _as_tuples(function: str, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every list given for one of ``function``'s
    :data:`TUPLE_ARGUMENTS` turned into a tuple (positional ones found by the signature)."""
    wanted = TUPLE_ARGUMENTS.get(function)
    if not wanted:
        return args, kwargs
    names = [p.name for p in _signature(_supersuit_function(function)).parameters.values()
             if p.name != "env"]
    args = tuple(tuple(a) if isinstance(a, list) and n in wanted else a
                 for n, a in zip(names, args, strict=False))
    kwargs = {k: tuple(v) if isinstance(v, list) and k in wanted else v
              for k, v in kwargs.items()}
    return args, kwargs


def _check_arguments(where: str, name: str, function: str, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> None:
    sig = _signature(_supersuit_function(function))
    params = [p for p in sig.parameters.values() if p.name != "env"]
    takes = ", ".join(p.name if p.default is inspect.Parameter.empty else
                      f"{p.name}={p.default!r}" for p in params) or "no arguments"
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    unknown = [k for k in kwargs if k not in {p.name for p in params}]
    if unknown and not open_kwargs:
        raise EnvSpecError(f"{where} {name}: unknown argument(s) {unknown}; {function} takes "
                           f"{takes}")
    try:
        sig.bind(None, *args, **kwargs)
    except TypeError as exc:
        raise EnvSpecError(f"{where} {name}: {exc}; {function} takes {takes}") from exc


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """A wrapper's signature; SuperSuit's ``WrapperChooser`` wrappers (``frame_skip_v0``)
    report ``*args``, so their parallel wrapper's is used."""
    sig = inspect.signature(fn)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values()):
        inner = vars(fn).get("parallel_wrapper") or vars(fn).get("aec_wrapper")
        if inner is not None:
            return inspect.signature(inner)
    return sig


def _supersuit_function(function: str) -> Callable[..., Any]:
    try:
        import supersuit
    except ImportError as exc:
        raise MissingPackageError("env.wrappers needs SuperSuit: pip install supersuit") from exc
    return getattr(supersuit, function)


def _spaces(env: ParallelEnv) -> str:
    agents = list(env.possible_agents)[:1]
    return f"(observation space of {agents[0]}: {env.observation_space(agents[0])})" if agents \
        else ""
