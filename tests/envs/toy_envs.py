"""Small PettingZoo parallel envs with exactly known trajectories, for the env-layer tests.

Observations encode ``[agent index, step in episode, episode number, last action received]`` so
a test can check placeholders, autoreset and which actions reached the env, value by value.
Each env is strict the way PettingZoo's parallel API is: ``step`` must get actions for exactly
the agents in ``self.agents``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv


class _Base(ParallelEnv):
    metadata: ClassVar[dict[str, Any]] = {"name": "toy", "is_parallelizable": True}
    obs_dim = 4

    def __init__(self, n_agents: int, prefix: str, continuous: bool = False) -> None:
        self.possible_agents = [f"{prefix}_{k}" for k in range(n_agents)]
        self.continuous = continuous
        self.episode = -1
        self.t = 0
        self.last = dict.fromkeys(self.possible_agents, -1.0)

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        if self.continuous:
            return spaces.Box(0.0, 1.0, (2,), np.float32)
        return spaces.Discrete(4)

    def _obs(self, agent: str) -> np.ndarray:
        k = self.possible_agents.index(agent)
        return np.array([k, self.t, self.episode, self.last[agent]], dtype=np.float32)

    def _start(self) -> None:
        self.episode += 1
        self.t = 0
        self.agents = list(self.possible_agents)
        self.last = dict.fromkeys(self.possible_agents, -1.0)

    def _take(self, actions: dict[str, Any]) -> None:
        if set(actions) != set(self.agents):
            raise ValueError(f"got actions for {sorted(actions)}, live agents are {self.agents}")
        for agent, act in actions.items():
            self.last[agent] = float(np.asarray(act).reshape(-1)[0])
        self.t += 1


class DyingEnv(_Base):
    """Agent ``d_k`` terminates at step ``deaths[k]``; the episode ends when all are dead or at
    ``max_steps`` (truncation of the survivors). Live agents get reward ``1 + k``."""

    def __init__(
        self, deaths: tuple[int, ...] = (1, 3, 5), max_steps: int = 100, delay: float = 0.0
    ) -> None:
        super().__init__(len(deaths), "d")
        self.deaths = deaths
        self.max_steps = max_steps
        self.delay = delay  # seconds of sleep per step: a slow simulator

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self._start()
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple:
        self._take(actions)
        if self.delay:
            time.sleep(self.delay)
        obs, rew, term, trunc, info = {}, {}, {}, {}, {}
        for a in self.agents:
            k = self.possible_agents.index(a)
            obs[a], rew[a], info[a] = self._obs(a), 1.0 + k, {}
            term[a] = self.t >= self.deaths[k]
            trunc[a] = self.t >= self.max_steps and not term[a]
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, info


class TurnEnv(_Base):
    """Two players, ``p_0`` acts at even steps and ``p_1`` at odd ones; all are truncated after
    ``max_steps``. The acting player gets reward 1. ``style`` says how turns are shown:

    * ``"missing"``: the waiting player gets no observation (it stays in ``self.agents``);
    * ``"eda"``: both observe; ``info[waiting]["env_defined_actions"]`` is ``noop``;
    * ``"legacy"``: both observe; top-level ``info["agent_mask"]`` / ``["env_defined_actions"]``.

    On the last step every player observes. ``last action received`` shows what the env got.
    """

    def __init__(self, style: str = "missing", max_steps: int = 5, continuous: bool = False):
        super().__init__(2, "p", continuous)
        self.style = style
        self.max_steps = max_steps
        self.noop = np.array([0.25, 0.75], np.float32) if continuous else np.array([2])

    def turn(self) -> str:
        return self.possible_agents[self.t % 2]

    def _observe(self, final: bool) -> tuple[dict, dict]:
        acting = self.turn()
        shown = self.agents if (final or self.style != "missing") else [acting]
        obs = {a: self._obs(a) for a in shown}
        info: dict[str, Any] = {a: {} for a in self.agents}
        if self.style == "eda":
            for a in self.agents:
                info[a]["env_defined_actions"] = None if a == acting else self.noop
        elif self.style == "legacy":
            info["agent_mask"] = {a: a == acting for a in self.agents}
            info["env_defined_actions"] = {a: self.noop for a in self.agents if a != acting}
        return obs, info

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self._start()
        return self._observe(final=False)

    def step(self, actions: dict[str, Any]) -> tuple:
        acting = self.turn()
        self._take(actions)
        done = self.t >= self.max_steps
        obs, info = self._observe(final=done)
        rew = {acting: 1.0}
        term = dict.fromkeys(self.agents, False)
        trunc = dict.fromkeys(self.agents, done)
        if done:
            self.agents = []
        return obs, rew, term, trunc, info


class CrashEnv(DyingEnv):
    """A ``DyingEnv`` that fails at step ``crash_at``: raises RuntimeError (``how="raise"``) or
    KeyboardInterrupt (``"interrupt"``), or kills its own process (``"kill"``)."""

    def __init__(self, crash_at: int = 2, how: str = "raise", deaths=(50, 50)) -> None:
        super().__init__(deaths)
        self.crash_at = crash_at
        self.how = how

    def step(self, actions: dict[str, Any]) -> tuple:
        if self.t + 1 == self.crash_at:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.how == "interrupt":  # as if Ctrl-C arrived during this step
                raise KeyboardInterrupt
            raise RuntimeError(f"boom at step {self.crash_at}")
        return super().step(actions)


class NonFiniteEnv(DyingEnv):
    """A ``DyingEnv`` whose ``d_1`` observation is NaN at step 2 and ``d_0`` reward inf at 3."""

    def __init__(self) -> None:
        super().__init__((50, 50))

    def step(self, actions: dict[str, Any]) -> tuple:
        obs, rew, term, trunc, info = super().step(actions)
        if self.t == 2:
            obs["d_1"] = obs["d_1"].copy()
            obs["d_1"][1] = np.nan
        if self.t == 3:
            rew["d_0"] = float("inf")
        return obs, rew, term, trunc, info


class InfRewardEnv(DyingEnv):
    """A ``DyingEnv`` whose ``d_0`` reward is inf at step 1 (observations stay finite)."""

    def __init__(self) -> None:
        super().__init__((50, 50))

    def step(self, actions: dict[str, Any]) -> tuple:
        obs, rew, term, trunc, info = super().step(actions)
        if self.t == 1:
            rew["d_0"] = float("inf")
        return obs, rew, term, trunc, info


def failing_factory() -> ParallelEnv:
    """An env factory that raises while building the env."""
    raise OSError("cannot open the simulator")


def mixed_group_env() -> DyingEnv:
    """Agents ``d_0``, ``d_1`` of one group whose observation spaces differ."""
    env = DyingEnv((5, 5))
    original = env.observation_space

    def observation_space(agent: str) -> spaces.Space:
        if agent == "d_1":
            return spaces.Box(-1.0, 1.0, (7,), np.float32)
        return original(agent)

    env.observation_space = observation_space  # type: ignore[method-assign]
    return env
