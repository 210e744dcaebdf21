"""A small PettingZoo ParallelEnv in a module of your own: two chasers on a line close in on a
target. The worked example of ``docs/your_env.md``.

Each chaser sees its own position, the target's and the other chaser's (``Box(3,)``), moves
left, stays or moves right (``Discrete(3)``), and is rewarded by minus its distance to the
target. An episode lasts ``max_steps`` steps; ``state()`` is every position, for MAPPO.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class ChaseEnv(ParallelEnv):
    metadata: ClassVar[dict[str, Any]] = {"name": "chase_v0", "render_modes": ["rgb_array"]}

    def __init__(self, max_steps: int = 25, render_mode: str | None = None) -> None:
        self.possible_agents = ["chaser_0", "chaser_1"]
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.state_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self._obs_spaces = {a: spaces.Box(-1.0, 1.0, (3,), np.float32)
                            for a in self.possible_agents}
        self._act_spaces = {a: spaces.Discrete(3) for a in self.possible_agents}
        self._pos = np.zeros(3, np.float32)  # chaser_0, chaser_1, target
        self._t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        rng = np.random.default_rng(seed)
        self._pos = rng.uniform(-1.0, 1.0, 3).astype(np.float32)
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        for i, agent in enumerate(self.possible_agents):
            self._pos[i] = np.clip(self._pos[i] + 0.1 * (int(actions[agent]) - 1), -1.0, 1.0)
        self._t += 1
        rewards = {a: -float(abs(self._pos[i] - self._pos[2]))
                   for i, a in enumerate(self.possible_agents)}
        done = self._t >= self.max_steps
        terminations = {a: False for a in self.agents}
        truncations = {a: done for a in self.agents}
        observations, infos = self._observations(), {a: {} for a in self.agents}
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        return self._pos.copy()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        frame = np.full((40, 200, 3), 255, np.uint8)
        for x, colour in zip(self._pos, ([200, 0, 0], [0, 0, 200], [0, 160, 0]), strict=True):
            col = int((x + 1.0) / 2.0 * 195)
            frame[15:25, col:col + 5] = colour
        return frame

    def _observations(self) -> dict[str, np.ndarray]:
        p = self._pos
        return {"chaser_0": np.array([p[0], p[2], p[1]], np.float32),
                "chaser_1": np.array([p[1], p[2], p[0]], np.float32)}


def parallel_env(**kwargs: Any) -> ChaseEnv:
    """What ``env.spec: chase_env:parallel_env`` builds."""
    return ChaseEnv(**kwargs)
