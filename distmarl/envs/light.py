"""A lighter parallel view of PettingZoo's standard AEC stacks: the same steps, less overhead.

Most PettingZoo envs with simultaneous moves (every mpe2 env) are an AEC ``raw_env`` behind
``OrderEnforcingWrapper`` and ``ClipOutOfBoundsWrapper`` (Box actions) or
``AssertOutOfBoundsWrapper`` (Discrete), turned parallel by ``aec_to_parallel``. In a rollout
worker that stack costs more than the env itself: every attribute read goes through two
``__getattr__`` layers, every action through ``Box.contains``, and ``aec_to_parallel`` calls
``last()`` before each agent's step, which computes an observation it throws away (mpe2
computes each observation twice per step).

:func:`lighten` recognises exactly that stack and returns :class:`LightParallel`, which steps the
same ``raw_env`` with ``aec_to_parallel``'s loop, minus the discarded ``last()``, and does the
wrappers' work inline: Box actions are clipped to the space (a NaN action or a wrong shape
raises ``ValueError`` naming the agent), Discrete actions are checked against the space.
Anything else (other wrappers, envs that are not parallelizable, parallel envs) is returned
unchanged. The vector env's tests check it step for step against the PettingZoo stack.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.conversions import aec_to_parallel_wrapper
from pettingzoo.utils.env import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import (
    AssertOutOfBoundsWrapper,
    BaseWrapper,
    ClipOutOfBoundsWrapper,
    OrderEnforcingWrapper,
)

#: the wrappers whose work :class:`LightParallel` does itself
KNOWN_WRAPPERS = (OrderEnforcingWrapper, ClipOutOfBoundsWrapper, AssertOutOfBoundsWrapper)


def lighten(env: Any) -> Any:
    """A :class:`LightParallel` over ``env``'s raw env when ``env`` is ``aec_to_parallel`` over
    only :data:`KNOWN_WRAPPERS`; otherwise ``env`` itself."""
    if type(env) is not aec_to_parallel_wrapper:
        return env
    inner, clip, check = env.aec_env, False, False
    while isinstance(inner, BaseWrapper):
        if type(inner) not in KNOWN_WRAPPERS:
            return env
        clip = clip or type(inner) is ClipOutOfBoundsWrapper
        check = check or type(inner) is AssertOutOfBoundsWrapper
        inner = inner.env
    if not isinstance(inner, AECEnv):
        return env
    return LightParallel(inner, clip=clip, check=check)


class LightParallel(ParallelEnv):
    """``aec_to_parallel`` over the bare ``raw`` AEC env, with the action clipping (``clip``)
    or checking (``check``) of the wrappers it replaces; see the module docstring."""

    def __init__(self, raw: AECEnv, clip: bool, check: bool) -> None:
        self.raw = raw
        self.clip, self.check = clip, check
        self.possible_agents = list(raw.possible_agents)
        self.agents: list[str] = []
        self.metadata = raw.metadata
        self.render_mode = getattr(raw, "render_mode", None)
        if hasattr(raw, "state_space"):
            self.state_space = raw.state_space
        self._act_space = {a: raw.action_space(a) for a in self.possible_agents}
        self._bounds = {a: (s.low, s.high) for a, s in self._act_space.items()
                        if isinstance(s, spaces.Box)}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.raw.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space[agent]

    @property
    def unwrapped(self) -> Any:
        return self.raw.unwrapped

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        raw = self.raw
        raw.reset(seed=seed, options=options)
        self.agents = raw.agents[:]
        obs = {a: raw.observe(a) for a in raw.agents
               if not (raw.terminations[a] or raw.truncations[a])}
        return obs, dict(**raw.infos)

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        """``aec_to_parallel``'s step: every live agent steps in turn, rewards summed over the
        cycle, then done agents are stepped out with ``None``."""
        raw = self.raw
        rewards: dict[str, float] = defaultdict(int)
        for agent in raw.agents:
            if agent != raw.agent_selection:
                raise AssertionError(f"expected agent {agent} got agent {raw.agent_selection}: "
                                     f"the parallel view expects agents to step in a cycle")
            raw.step(self._action(agent, actions[agent]))
            for a in raw.agents:
                rewards[a] += raw.rewards[a]
        terminations = dict(**raw.terminations)
        truncations = dict(**raw.truncations)
        infos = dict(**raw.infos)
        obs = {a: raw.observe(a) for a in raw.agents}
        while raw.agents and (raw.terminations[raw.agent_selection]
                              or raw.truncations[raw.agent_selection]):
            raw.step(None)
        self.agents = raw.agents
        return obs, rewards, terminations, truncations, infos

    def _action(self, agent: str, action: Any) -> Any:
        """What the replaced wrappers pass on: a Box action clipped to its bounds, a Discrete
        one checked."""
        if action is None:
            return None
        if self.clip and agent in self._bounds:
            action = np.asarray(action)
            low, high = self._bounds[agent]
            if action.shape != low.shape:
                raise ValueError(f"action of {agent!r} has shape {action.shape}, its space "
                                 f"{low.shape}")
            if np.isnan(action).any():
                raise ValueError(f"action of {agent!r} is NaN: {action}")
            return np.clip(action, low, high)
        if self.check and not self._act_space[agent].contains(action):
            raise ValueError(f"action {action!r} of {agent!r} is outside its space "
                             f"{self._act_space[agent]}")
        return action

    def state(self) -> np.ndarray:
        return self.raw.state()

    def render(self) -> Any:
        return self.raw.render()

    def close(self) -> None:
        self.raw.close()
