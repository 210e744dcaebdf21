"""Env specs -> PettingZoo parallel envs.

A spec is ``"package.module:attr"``. ``attr`` may be an env module (``"mpe2:simple_spread_v3"``,
``"pettingzoo.sisl:pursuit_v5"``), whose ``parallel_env`` (else ``env``) is called, or any
callable returning an env (``"my_pkg.envs:make_arena"``). Without ``:attr`` the module itself
must be an env module. Keyword arguments pass through to the env (``continuous_actions=True``,
``max_cycles=25``). An AEC env is converted: ``aec_to_parallel`` when its metadata says it is
parallelizable, else ``turn_based_aec_to_parallel`` (one agent acts per step). PettingZoo's
standard wrapper stack is stepped through a lighter parallel view (:mod:`distmarl.envs.light`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel_wrapper
from pettingzoo.utils.env import AECEnv, ParallelEnv

from distmarl.envs.errors import EnvSpecError, MissingPackageError
from distmarl.envs.light import lighten
from distmarl.envs.preprocess import WrapperSpec, apply_wrappers
from distmarl.envs.renamed import (
    MOVED,
    deprecated_env,
    env_names,
    is_deprecated,
    missing_env,
    moved_env,
)

#: pip command per package (or PettingZoo env family) that holds envs, for error messages.
PIP_NAMES: dict[str, str] = {
    "mpe2": "mpe2",
    "magent2": "magent2",
    "pettingzoo": "pettingzoo",
    "pettingzoo.atari": "'pettingzoo[atari]'",
    "pettingzoo.butterfly": "'pettingzoo[butterfly]'",
    "pettingzoo.classic": "'pettingzoo[classic]'",
    "pettingzoo.sisl": "'pettingzoo[sisl]'",
}


def make_env(spec: str | Callable[..., Any], *, light: bool = True,
             wrappers: Sequence[WrapperSpec] = (), **kwargs: Any) -> ParallelEnv:
    """Build the parallel env named by ``spec`` (or returned by the callable ``spec``).
    ``light``: PettingZoo's standard AEC stack is stepped through
    :class:`~distmarl.envs.light.LightParallel` (same steps, less overhead); False keeps
    PettingZoo's own wrappers. ``wrappers`` (:func:`~distmarl.envs.preprocess.parse_wrappers`)
    are applied last, in order."""
    factory = resolve(spec) if isinstance(spec, str) else spec
    try:
        env = factory(**kwargs)
    except ImportError as exc:
        raise _import_error(str(spec), exc) from exc
    env = to_parallel(env, str(spec))
    return apply_wrappers(lighten(env) if light else env, wrappers)


class EnvFactory:
    """Picklable zero-argument factory ``make_env(spec, wrappers=..., **kwargs)``, for
    ``VectorParallelEnv``."""

    def __init__(self, spec: str, wrappers: Sequence[WrapperSpec] = (), **kwargs: Any) -> None:
        self.spec = spec
        self.wrappers = tuple(wrappers)
        self.kwargs = kwargs

    def __call__(self) -> ParallelEnv:
        return make_env(self.spec, wrappers=self.wrappers, **self.kwargs)

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        wrapped = f", wrappers={[w.name for w in self.wrappers]}" if self.wrappers else ""
        return f"EnvFactory({self.spec!r}{wrapped}{args})"


def make_vector_env(
    spec: str,
    num_envs: int,
    *,
    mode: str = "async",
    seed: int | None = None,
    num_workers: int | None = None,
    nonfinite: str = "raise",
    global_state: bool = False,
    wrappers: Sequence[WrapperSpec] = (),
    max_episode_steps: int | str = "auto",
    **env_kwargs: Any,
) -> Any:
    """``VectorParallelEnv`` of ``num_envs`` copies of ``make_env(spec, **env_kwargs)``
    (``global_state``: also return each sub-env's ``env.state()``; ``max_episode_steps``:
    the episodes' step limit; see ``VectorParallelEnv``)."""
    from distmarl.envs.vector import VectorParallelEnv

    resolve(spec)  # fail here, with a clear message, rather than in every worker
    return VectorParallelEnv(
        [EnvFactory(spec, wrappers, **env_kwargs)] * num_envs,
        mode=mode,  # type: ignore[arg-type]
        seed=seed,
        num_workers=num_workers,
        nonfinite=nonfinite,  # type: ignore[arg-type]
        global_state=global_state,
        max_episode_steps=max_episode_steps,  # type: ignore[arg-type]
    )


class TurnBasedParallel(turn_based_aec_to_parallel_wrapper):
    """PettingZoo's ``turn_based_aec_to_parallel``, whose reset infos also name the agent to
    move (``info[agent]["active_agent"]``, as its steps do): without it the first move of
    every episode counted as every agent's own."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, infos = super().reset(seed=seed, options=options)
        turn = self.aec_env.agent_selection
        return obs, {a: {**i, "active_agent": turn} for a, i in infos.items()}


def to_parallel(env: Any, spec: str = "") -> ParallelEnv:
    """``env`` as a parallel env: returned as is, or converted from AEC where PettingZoo can."""
    if isinstance(env, ParallelEnv):
        return env
    if isinstance(env, AECEnv):
        if env.metadata.get("is_parallelizable", False):
            return aec_to_parallel(env)
        return TurnBasedParallel(env)
    if all(
        hasattr(env, name) for name in ("possible_agents", "reset", "step", "action_space")
    ) and (not hasattr(env, "agent_selection")):
        return env  # duck-typed parallel env
    raise EnvSpecError(
        f"produced {type(env).__name__}, which is neither a PettingZoo ParallelEnv nor an "
        "AECEnv that can be converted to one", spec=spec or None)


def resolve(spec: str) -> Callable[..., Any]:
    """The env factory a spec names (see the module docstring); errors say what is wrong."""
    if not isinstance(spec, str) or not spec.strip(":"):
        raise EnvSpecError(f"env spec must be 'package.module:attr', got {spec!r}")
    module_name, _, attr = spec.partition(":")
    target = _import(module_name, spec)
    if attr:
        target = _attribute(target, attr, spec)
    if is_deprecated(target):
        raise EnvSpecError(_deprecated(module_name, attr), spec=spec)
    if isinstance(target, ModuleType) or not callable(target):  # env modules, look-alikes
        for name in ("parallel_env", "env"):
            if callable(getattr(target, name, None)):
                return getattr(target, name)
        if isinstance(target, ModuleType):
            raise EnvSpecError(
                f"module {target.__name__!r} has neither parallel_env nor env", spec=spec)
        raise EnvSpecError(f"{attr!r} is a {type(target).__name__}, not callable", spec=spec)
    return target


def _deprecated(module_name: str, attr: str) -> str:
    """:func:`~distmarl.envs.renamed.deprecated_env` for ``module:attr`` or ``package.env``."""
    if not attr:
        module_name, _, attr = module_name.rpartition(".")
    return deprecated_env(module_name, attr, env_names(importlib.import_module(module_name)))


def _import(name: str, spec: str) -> Any:
    """The module ``name``; a dotted name that is not a module may be an attribute (or an old
    version of an env) of its parent package, looked up there."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        parent, _, child = name.rpartition(".")
        if exc.name == name and parent:
            return _attribute(_import(parent, spec), child, spec)
        raise _import_error(spec, exc, name) from exc
    except ImportError as exc:
        raise _import_error(spec, exc, name) from exc


def _attribute(module: ModuleType, attr: str, spec: str) -> Any:
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        if type(exc).__name__ == "RemovedEnv":  # PettingZoo's envs removed for good
            raise EnvSpecError(str(exc), spec=spec) from None
    except ImportError as exc:  # lazily imported env modules (e.g. pettingzoo.atari)
        raise _import_error(spec, exc, f"{module.__name__}.{attr}") from exc
    if hasattr(module, "__path__"):  # a package: the attribute may be a submodule
        try:
            return importlib.import_module(f"{module.__name__}.{attr}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{module.__name__}.{attr}":
                raise _import_error(spec, exc, f"{module.__name__}.{attr}") from exc
        except ImportError as exc:
            raise _import_error(spec, exc, f"{module.__name__}.{attr}") from exc
    raise EnvSpecError(missing_env(module, attr), spec=spec)


def _import_error(spec: str, exc: ImportError, wanted: str = "") -> Exception:
    """Turn an import failure into an unknown-module or missing-package error with a pip hint."""
    module_name, _, attr = spec.partition(":")
    wanted = wanted or module_name
    for old in MOVED:
        if wanted == old or wanted.startswith(old + "."):
            return MissingPackageError(moved_env(old, module_name, attr), spec=spec)
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and (wanted == missing or wanted.startswith(missing + ".")):
        top = missing.split(".")[0]
        if top not in PIP_NAMES:
            return EnvSpecError(
                f"no module named {missing!r} (check the spelling, or pip install the package "
                "that provides it)", spec=spec)
        return MissingPackageError(
            f"needs {top!r}, which is not installed: pip install {PIP_NAMES[top]}", spec=spec)
    if missing:  # the env module imports something that is not installed
        family = next(
            (k for k in sorted(PIP_NAMES, key=len, reverse=True) if wanted.startswith(k)), None
        )
        pip = PIP_NAMES[family] if family else missing.split(".")[0]
        return MissingPackageError(
            f"importing {wanted!r} needs {missing!r}, which is not installed: pip install {pip}",
            spec=spec)
    return EnvSpecError(f"{type(exc).__name__}: {exc}", spec=spec)
