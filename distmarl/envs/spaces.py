"""Space leaves, placeholders and the one memory block that holds every batched array.

A (possibly nested) observation space is flattened into *leaves*: one ``Leaf`` per Box,
Discrete, MultiDiscrete or MultiBinary inside Dict / Tuple spaces. Each leaf gets one array
``(num_envs, *leaf.shape)``; ``assemble`` rebuilds the nested structure from the leaf arrays.

``VectorLayout`` is the plain, picklable description of every array a vector env exchanges with
its sub-envs (observations, final observations, rewards, flags, masks, actions, and the env's
global state ``env.state()`` when it is recorded). ``buffers(raw)``
lays the arrays out on any byte buffer: a numpy array in sync mode, a shared-memory ``RawArray``
in async mode, so both modes run the same code on the same layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from gymnasium import spaces

Path = tuple[Any, ...]
_ALIGN = 64  # bytes; every array starts on its own cache line


@dataclass(frozen=True)
class Leaf:
    """One array-valued part of a space: ``path`` of Dict keys / Tuple indices, shape, dtype."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype


def space_leaves(space: spaces.Space) -> tuple[Leaf, ...]:
    """The leaves of ``space`` in a fixed order (Dict key order, Tuple index order)."""
    if isinstance(space, spaces.Dict):
        return tuple(
            Leaf((key, *leaf.path), leaf.shape, leaf.dtype)
            for key, sub in space.spaces.items()
            for leaf in space_leaves(sub)
        )
    if isinstance(space, spaces.Tuple):
        return tuple(
            Leaf((i, *leaf.path), leaf.shape, leaf.dtype)
            for i, sub in enumerate(space.spaces)
            for leaf in space_leaves(sub)
        )
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        # gymnasium types ``Space.shape`` as optional; these four spaces always have one
        shape = cast("tuple[int, ...]", space.shape)
        return (Leaf((), tuple(int(d) for d in shape), np.dtype(space.dtype)),)
    raise TypeError(
        f"unsupported space {space!r}: vectorised envs support Box, Discrete, MultiDiscrete, "
        "MultiBinary and Dict / Tuple spaces made of them"
    )


def action_leaf(space: spaces.Space, agent: str) -> Leaf:
    """The single leaf of an action space (structured action spaces are not supported)."""
    found = space_leaves(space)
    if len(found) != 1 or found[0].path:
        raise TypeError(f"agent {agent!r}: structured action space {space!r} is not supported")
    return found[0]


def placeholder(dtype: np.dtype) -> float:
    """Fill value of a missing row: NaN for float dtypes; 0 where NaN cannot be stored."""
    return float("nan") if np.issubdtype(dtype, np.floating) else 0


def get_path(value: Any, path: Path) -> Any:
    """``value[path[0]][path[1]]...``: the leaf of a nested observation."""
    for key in path:
        value = value[key]
    return value


def assemble(space: spaces.Space, arrays: Sequence[np.ndarray]) -> Any:
    """Rebuild the nested structure of ``space`` from its leaf arrays (``space_leaves`` order)."""
    it = iter(arrays)

    def build(sub: spaces.Space) -> Any:
        if isinstance(sub, spaces.Dict):
            return {key: build(s) for key, s in sub.spaces.items()}
        if isinstance(sub, spaces.Tuple):
            return tuple(build(s) for s in sub.spaces)
        return next(it)

    return build(space)


@dataclass
class Buffers:
    """Named views of the batched arrays; every leading axis is the sub-env axis ``num_envs``.

    ``obs[a]`` / ``final_obs[a]``: list of leaf arrays ``(num_envs, *leaf.shape)``;
    ``reward[a]`` float64; bool ``(num_envs,)``: ``term[a]``, ``trunc[a]``, ``observed[a]`` (a
    real observation in ``obs``), ``active[a]`` (observed and not done: acts next step),
    ``final_observed[a]``, ``live[a]`` (in ``env.agents``), ``policy[a]``; ``eda[a]`` float64 and ``action[a]`` in the
    action dtype, both ``(num_envs, *act_shape)``; ``ended`` bool ``(num_envs,)``. With a
    recorded global state: ``state`` ``(num_envs, *state_shape)`` (``env.state()`` after the
    step or reset) and ``final_state`` (before an autoreset); None otherwise.
    """

    obs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    final_obs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    reward: dict[str, np.ndarray] = field(default_factory=dict)
    term: dict[str, np.ndarray] = field(default_factory=dict)
    trunc: dict[str, np.ndarray] = field(default_factory=dict)
    observed: dict[str, np.ndarray] = field(default_factory=dict)
    active: dict[str, np.ndarray] = field(default_factory=dict)
    final_observed: dict[str, np.ndarray] = field(default_factory=dict)
    live: dict[str, np.ndarray] = field(default_factory=dict)
    policy: dict[str, np.ndarray] = field(default_factory=dict)
    eda: dict[str, np.ndarray] = field(default_factory=dict)
    action: dict[str, np.ndarray] = field(default_factory=dict)
    ended: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    state: np.ndarray | None = None
    final_state: np.ndarray | None = None


def state_leaf(env: Any) -> Leaf:
    """The leaf of ``env.state()``: ``env.state_space`` must be a Box (PettingZoo's convention
    for envs with a global state); ValueError naming the env's type otherwise."""
    space = getattr(env, "state_space", None)
    if not isinstance(space, spaces.Box):
        raise ValueError(
            f"{type(env).__name__} has no global state to record: its state_space is "
            f"{space!r}, a gymnasium Box is needed (PettingZoo envs with env.state() define one)"
        )
    return Leaf((), tuple(int(d) for d in space.shape), np.dtype(space.dtype))


@dataclass(frozen=True)
class VectorLayout:
    """Plain description of a vector env's agents, leaves and arrays (picklable)."""

    num_envs: int
    agents: tuple[str, ...]
    obs_leaves: dict[str, tuple[Leaf, ...]]
    act_leaves: dict[str, Leaf]
    #: the global state's leaf when ``env.state()`` is recorded, else None
    state: Leaf | None = None

    @classmethod
    def from_env(cls, env: Any, num_envs: int, global_state: bool = False) -> VectorLayout:
        """Read ``possible_agents`` and the spaces of one parallel env (and its state space,
        with ``global_state``)."""
        agents = tuple(env.possible_agents)
        return cls(
            num_envs=num_envs,
            agents=agents,
            obs_leaves={a: space_leaves(env.observation_space(a)) for a in agents},
            act_leaves={a: action_leaf(env.action_space(a), a) for a in agents},
            state=state_leaf(env) if global_state else None,
        )

    def fields(self) -> list[tuple[tuple[Any, ...], tuple[int, ...], np.dtype]]:
        """Every array as ``(key, shape, dtype)`` in allocation order."""
        n = self.num_envs
        out: list[tuple[tuple[Any, ...], tuple[int, ...], np.dtype]] = []
        flag = np.dtype(bool)
        for a in self.agents:
            for k, leaf in enumerate(self.obs_leaves[a]):
                out.append((("obs", a, k), (n, *leaf.shape), leaf.dtype))
                out.append((("final_obs", a, k), (n, *leaf.shape), leaf.dtype))
            act = self.act_leaves[a]
            out.append((("action", a), (n, *act.shape), act.dtype))
            out.append((("eda", a), (n, *act.shape), np.dtype(np.float64)))
            out.append((("reward", a), (n,), np.dtype(np.float64)))
            for name in ("term", "trunc", "observed", "active", "final_observed", "live", "policy"):
                out.append(((name, a), (n,), flag))
        out.append((("ended",), (n,), flag))
        if self.state is not None:
            for name in ("state", "final_state"):
                out.append(((name,), (n, *self.state.shape), self.state.dtype))
        return out

    def nbytes(self) -> int:
        """Size of the byte buffer ``buffers`` needs."""
        total = 0
        for _, shape, dtype in self.fields():
            total += _aligned(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        return max(total, 1)

    def buffers(self, raw: Any) -> Buffers:
        """Views of every array on ``raw`` (anything with the buffer protocol, ``nbytes()`` long)."""
        base = np.frombuffer(raw, dtype=np.uint8)
        bufs = Buffers()
        offset = 0
        for key, shape, dtype in self.fields():
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            view = base[offset : offset + size].view(dtype).reshape(shape)
            offset += _aligned(size)
            name = key[0]
            if name in ("obs", "final_obs"):
                getattr(bufs, name).setdefault(key[1], []).append(view)
            elif len(key) == 1:  # ended, state, final_state
                setattr(bufs, name, view)
            else:
                getattr(bufs, name)[key[1]] = view
        return bufs


def _aligned(size: int) -> int:
    return (size + _ALIGN - 1) // _ALIGN * _ALIGN
