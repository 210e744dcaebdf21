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
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo.utils import AgentSelector
from pettingzoo.utils.env import AECEnv, ParallelEnv


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


class EndlessEnv(_Base):
    """A game without a move limit: players ``e_0`` and ``e_1`` act at every step and are
    never terminated or truncated. ``e_0`` gets reward 1 per step and ``e_1`` 0, a score that
    would decide the game if it ever ended. ``declared``: a gymnasium-style
    ``spec.max_episode_steps`` the env states but does not enforce (None: it states none)."""

    def __init__(self, declared: int | None = None, continuous: bool = False) -> None:
        super().__init__(2, "e", continuous)
        if declared is not None:
            self.spec = SimpleNamespace(max_episode_steps=declared)
        self._spaces = {a: (_Base.observation_space(self, a), _Base.action_space(self, a))
                        for a in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self._spaces[agent][0]

    def action_space(self, agent: str) -> spaces.Space:
        return self._spaces[agent][1]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self._start()
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple:
        self._take(actions)
        obs = {a: self._obs(a) for a in self.agents}
        rew = {"e_0": 1.0, "e_1": 0.0}
        never = dict.fromkeys(self.agents, False)
        return obs, rew, never, dict(never), {a: {} for a in self.agents}


class EndlessTurns(AECEnv):
    """The AEC form of :class:`EndlessEnv`: ``e_0`` and ``e_1`` move in turn, forever
    (not parallelizable: distmarl steps it one move at a time). The mover gets reward 1.
    ``max_cycles``: a limit the env states but does not enforce."""

    metadata: ClassVar[dict[str, Any]] = {"name": "endless_turns", "is_parallelizable": False}

    def __init__(self, max_cycles: int | None = None) -> None:
        super().__init__()
        self.possible_agents = ["e_0", "e_1"]
        self.render_mode = None
        self.max_cycles = max_cycles  # stated (in cycles of both moves), never enforced
        self.t = 0
        self._obs_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self._act_space = spaces.Discrete(3)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def observe(self, agent: str) -> np.ndarray:
        return np.array([self.possible_agents.index(agent), self.t], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.t = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def step(self, action: Any) -> None:
        mover = self.agent_selection
        self._cumulative_rewards[mover] = 0.0
        self.rewards = {a: float(a == mover) for a in self.agents}
        self.t += 1
        self.agent_selection = self._selector.next()
        self._accumulate_rewards()


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


class CrowdEnv(ParallelEnv):
    """Many agents with image-like observations, magent2 battle's shapes at a smaller count:
    ``n_agents`` agents (``ant_k``, one group), each observing a float32
    ``(13, 13, 5)`` view (about 3.4 KB) filled with the step number, ``Discrete(21)`` actions,
    reward 1 per step, truncated after ``max_steps``."""

    metadata: ClassVar[dict[str, Any]] = {"name": "crowd", "is_parallelizable": True}
    view = (13, 13, 5)

    def __init__(self, n_agents: int = 100, max_steps: int = 20) -> None:
        self.possible_agents = [f"ant_{k}" for k in range(n_agents)]
        self.max_steps = max_steps
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0.0, 1.0, self.view, np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(21)

    def _obs(self) -> dict[str, np.ndarray]:
        frame = np.full(self.view, self.t / self.max_steps, np.float32)
        return {a: frame.copy() for a in self.agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple:
        if set(actions) != set(self.agents):
            raise ValueError(f"got actions for {sorted(actions)}, live agents are {self.agents}")
        self.t += 1
        done = self.t >= self.max_steps
        obs = self._obs()
        rew = dict.fromkeys(self.agents, 1.0)
        term = dict.fromkeys(self.agents, False)
        trunc = dict.fromkeys(self.agents, done)
        info: dict[str, dict] = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rew, term, trunc, info


class BrokenEnv(DyingEnv):
    """A ``DyingEnv`` that builds but fails on ``fails_on`` (``"reset"`` or ``"step"``, its
    first one): raises RuntimeError (``how="raise"``) or aborts its process from native code
    (``"abort"``, as a simulator's failed C assertion does)."""

    def __init__(self, fails_on: str = "reset", how: str = "raise") -> None:
        super().__init__((50, 50))
        self.fails_on = fails_on
        self.how = how

    def _fail(self, phase: str) -> None:
        if phase != self.fails_on:
            return
        if self.how == "abort":
            os.abort()
        raise RuntimeError(f"simulator broke on {phase}")

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self._fail("reset")
        return super().reset(seed, options)

    def step(self, actions: dict[str, Any]) -> tuple:
        self._fail("step")
        return super().step(actions)
