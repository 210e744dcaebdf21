"""Every episode ends: a step limit per episode, read from the env where it declares one.

A game with no move limit of its own (go, chess between two policies that never resign, a user
env that never sets ``terminated``) would run forever, and every evaluation or league game on
it would hang. :class:`StepLimit` wraps a parallel env and, at the ``limit``-th step of an
episode the env did not end itself, truncates every live agent (truncated, not terminated:
the episode goes on beyond what was seen, so training bootstraps from its last observation)
and marks the step's info with :data:`CAPPED_KEY`; the vector env reports such episodes in
``infos["capped"]``.

The limit (``env.max_episode_steps``) is an int, or ``"auto"``: the env's own limit where it
declares one (:func:`declared_limit`: ``max_cycles``, ``max_steps`` or
``max_episode_steps``, or a gymnasium-style ``spec.max_episode_steps``, on the env or any env
it wraps); else, for a turn-based board game (one move per step, a board observation of rank
3), a limit that fits its board (:func:`board_limit`: :data:`MOVES_PER_CELL` moves per cell,
or per action where it has more actions than cells: go on 5x5 gets 208 moves); else
:data:`DEFAULT_MAX_EPISODE_STEPS`, which :func:`default_limit_note` says (the run warns). An
env that ends its episodes at its own limit is therefore never cut short: the env ends them
first.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from typing import Any, Literal

from pettingzoo.utils.conversions import turn_based_aec_to_parallel_wrapper
from pettingzoo.utils.wrappers import BaseParallelWrapper

__all__ = ["CAPPED_KEY", "DEFAULT_MAX_EPISODE_STEPS", "MOVES_PER_CELL", "LimitedFactory",
           "StepLimit", "board_limit", "declared_limit", "default_limit_note", "resolve_limit"]

#: Env steps per episode when neither the config nor the env gives a limit: long enough for
#: any board game or arena episode, short enough that an endless one costs seconds.
DEFAULT_MAX_EPISODE_STEPS = 10_000
#: A turn-based board game's moves per cell of its board (or per action, where it has more):
#: room for long games (captures free cells again in go), still seconds for one that never ends.
MOVES_PER_CELL = 8
#: Attributes that hold an env's own episode limit, in env steps (or cycles).
LIMIT_ATTRIBUTES = ("max_episode_steps", "max_cycles", "max_steps")
#: Attributes through which wrappers and converters hold the env they wrap.
INNER_ATTRIBUTES = ("env", "aec_env", "par_env", "raw")
#: Top-level info key of the step a limit ended (lifted into ``infos["capped"]``).
CAPPED_KEY = "distmarl_step_limit"

Setting = int | Literal["auto"]


def _static(obj: Any, name: str) -> Any:
    """``obj.name`` without going through ``__getattr__`` forwarding (None when absent); a
    property is read."""
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        return None
    if isinstance(value, property):
        try:
            return getattr(obj, name)
        except Exception:  # a property that cannot be read here is no limit
            return None
    return value


def _chain(env: Any, depth: int = 16) -> list[Any]:
    """``env`` and every env it wraps (through :data:`INNER_ATTRIBUTES`), outermost first."""
    out: list[Any] = []
    queue = [env]
    while queue and len(out) < depth:
        obj = queue.pop(0)
        if any(obj is seen for seen in out):
            continue
        out.append(obj)
        queue += [inner for name in INNER_ATTRIBUTES
                  if (inner := _static(obj, name)) is not None and not isinstance(inner, type)]
    return out


def _positive_int(value: Any) -> int | None:
    """``value`` as an int when it is a whole number >= 1 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return int(number) if number >= 1 and number.is_integer() else None


def declared_limit(env: Any) -> int | None:
    """The env's own episode limit in parallel steps, the first one declared going inwards
    (see the module docstring); None when it declares none. A turn-based game
    (``turn_based_aec_to_parallel``: one agent moves per step) counts its cycles in moves of
    every agent, so its limit is multiplied by the number of agents."""
    chain = _chain(env)
    for obj in chain:
        found = [_positive_int(_static(obj, name)) for name in LIMIT_ATTRIBUTES]
        found.append(_positive_int(_static(_static(obj, "spec"), "max_episode_steps")))
        limit = next((v for v in found if v is not None), None)
        if limit is not None:
            return limit * len(env.possible_agents) if _turn_based(env) else limit
    return None


def _turn_based(env: Any) -> bool:
    """Whether ``env`` moves one agent per step (``turn_based_aec_to_parallel``)."""
    return any(isinstance(o, turn_based_aec_to_parallel_wrapper) for o in _chain(env))


def _board_cells(space: Any) -> int | None:
    """Cells of a board observation: a Box of rank 3 (or a Dict's ``observation`` one), read
    as PettingZoo's board games lay it out, ``(height, width, planes)``; None otherwise."""
    inner = getattr(space, "spaces", None)
    if isinstance(inner, dict):
        space = inner.get("observation")
    shape = getattr(space, "shape", None)
    if shape is None or len(shape) != 3:
        return None
    return int(shape[0]) * int(shape[1])


def board_limit(env: Any) -> int | None:
    """A turn-based board game's step limit: :data:`MOVES_PER_CELL` times its board's cells
    or its actions, whichever are more (go on 5x5: 25 cells, 26 actions, so 208 moves), at most
    :data:`DEFAULT_MAX_EPISODE_STEPS`. The board is read from the innermost env's observation
    space (the game's own layout, before any wrapper). None for another env."""
    if not _turn_based(env):
        return None
    agent = env.possible_agents[0]
    game = next((o for o in reversed(_chain(env)) if callable(_static(o, "observation_space"))),
                env)
    cells = _board_cells(game.observation_space(agent))
    if cells is None:
        return None
    actions = int(getattr(env.action_space(agent), "n", 0))
    return min(MOVES_PER_CELL * max(cells, actions), DEFAULT_MAX_EPISODE_STEPS)


def default_limit_note(setting: Setting, env: Any) -> str | None:
    """What to tell the user when ``setting`` (``"auto"``) leaves ``env`` with
    :data:`DEFAULT_MAX_EPISODE_STEPS`: it declares no limit of its own and is no board game;
    None when the limit comes from the config, the env or its board."""
    if setting != "auto" or declared_limit(env) is not None or board_limit(env) is not None:
        return None
    return (f"the env declares no episode limit of its own (max_cycles, max_steps, "
            f"max_episode_steps): episodes still running after {DEFAULT_MAX_EPISODE_STEPS:,} "
            f"env steps are cut (a cut league game is a draw); set env.max_episode_steps to a "
            f"length its episodes finish within")


def resolve_limit(setting: Setting, env: Any) -> int:
    """The step limit of ``env``'s episodes: ``setting`` itself, or (``"auto"``) the env's
    :func:`declared_limit`, else its :func:`board_limit`, else
    :data:`DEFAULT_MAX_EPISODE_STEPS`; ValueError naming the setting when it is neither
    ``"auto"`` nor an int >= 1."""
    if setting == "auto":
        return declared_limit(env) or board_limit(env) or DEFAULT_MAX_EPISODE_STEPS
    limit = _positive_int(setting)
    if limit is None or isinstance(setting, float):
        raise ValueError(f"env.max_episode_steps must be an int >= 1 or 'auto', got {setting!r}")
    return limit


class StepLimit(BaseParallelWrapper):
    """A parallel env whose episodes end at ``limit`` steps (see the module docstring);
    ``"auto"`` is resolved on this env (sub-envs may declare different limits)."""

    def __init__(self, env: Any, limit: Setting) -> None:
        super().__init__(env)
        self.limit = resolve_limit(limit, env)
        self.steps = 0

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    @property
    def possible_agents(self) -> list[str]:
        return self.env.possible_agents

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.steps = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
        """The env's step; at the limit, every agent of an episode still running is
        truncated and the info says :data:`CAPPED_KEY`."""
        before = list(self.env.agents)
        obs, rew, term, trunc, info = self.env.step(actions)
        self.steps += 1
        if self.steps < self.limit or _ended(before, self.env.agents, term, trunc):
            return obs, rew, term, trunc, info
        trunc = {**trunc, **{a: not term.get(a, False) for a in (*before, *self.env.agents)}}
        return obs, rew, term, trunc, {**info, CAPPED_KEY: True}


def _ended(before: list[str], after: list[str], term: dict[str, Any],
           trunc: dict[str, Any]) -> bool:
    """Whether the env itself ended the episode (the vector env's rule)."""
    return not after or all(term.get(a, False) or trunc.get(a, False) for a in before)


class LimitedFactory:
    """A picklable env factory: ``factory()``'s env under a :class:`StepLimit` of ``limit``."""

    def __init__(self, factory: Callable[[], Any], limit: Setting) -> None:
        self.factory, self.limit = factory, limit

    def __call__(self) -> StepLimit:
        return StepLimit(self.factory(), self.limit)

    def __repr__(self) -> str:
        return f"LimitedFactory({self.factory!r}, limit={self.limit!r})"
