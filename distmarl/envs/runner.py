"""Step a contiguous slice of sub-envs, writing every result into shared ``Buffers``.

``SubEnvRunner`` is the only code that talks to PettingZoo envs; the sync mode runs one over
all sub-envs in-process and every async worker process runs one over its slice. It implements:

* **Same-step autoreset.** When a sub-env's episode ends, its true last observations go to
  ``final_obs`` (``ended[i]`` set), the env is reset at once, and ``obs`` holds the reset
  observations. Rewards, terminations and truncations are those of the ending step.
* **Activity.** ``active[a][i]``: agent ``a`` has an observation in sub-env ``i`` and was
  neither terminated nor truncated by this step, so it acts at the next step. At the step an
  agent terminates its last observation is real (it is the transition's next obs) but inactive.
* **Missing agents** (dead, not yet acting, or waiting for their turn): NaN placeholder
  observations (0 for integer dtypes), reward 0 unless the env gives one, inactive.
  A missing agent that is no longer in ``env.agents`` is reported ``terminated=True`` (AgileRL's
  placeholder for dead agents); one still in ``env.agents`` (waiting) ``terminated=False``.
  Truncation placeholders are False. Actions are passed only for agents in ``env.agents``, as
  the PettingZoo parallel API requires.
* **Global state** (when the layout records it): ``state[i]`` is ``env.state()`` after each
  reset and step (after the autoreset where one happened), ``final_state[i]`` the state of the
  ending step, read before the autoreset.
* **AgileRL agent masking.** ``info[agent]["env_defined_actions"]`` (None: the policy acts) and
  the older top-level ``info["agent_mask"]`` / ``info["env_defined_actions"]`` dicts, plus
  PettingZoo's turn-based ``info[agent]["active_agent"]``, become ``policy[a][i]`` (True: the
  policy's action is used next step) and ``eda[a][i]`` (the env-defined action, NaN if none).

An episode ends when ``env.agents`` is empty after a step, or when every agent that was live
before the step is terminated or truncated by it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distmarl.envs.spaces import (
    Buffers,
    VectorLayout,
    get_path,
    placeholder,
    space_leaves,
    state_leaf,
)

#: Keys taken out of per-agent infos (they are returned as masks / arrays instead).
AGENT_INFO_KEYS = frozenset({"env_defined_actions", "active_agent"})
#: Top-level keys of the older AgileRL convention, likewise taken out.
LEGACY_INFO_KEYS = frozenset({"agent_mask", "env_defined_actions"})

Info = dict[str, Any]


def check_compatible(env: Any, layout: VectorLayout, index: int) -> None:
    """Raise ValueError if sub-env ``index`` has other agents or spaces than ``layout``."""
    agents = tuple(env.possible_agents)
    if agents != layout.agents:
        raise ValueError(
            f"sub-env {index} has possible_agents {list(agents)}, sub-env 0 has "
            f"{list(layout.agents)}: all sub-envs must have the same agents in the same order"
        )
    for a in agents:
        leaves = space_leaves(env.observation_space(a))
        if leaves != layout.obs_leaves[a]:
            raise ValueError(f"sub-env {index}: observation space of {a!r} differs from sub-env 0")
        acts = space_leaves(env.action_space(a))
        if acts != (layout.act_leaves[a],):
            raise ValueError(f"sub-env {index}: action space of {a!r} differs from sub-env 0")
    if layout.state is not None and state_leaf(env) != layout.state:
        raise ValueError(f"sub-env {index}: state space differs from sub-env 0")


def has_content(info: Mapping[str, Any], agents: frozenset[str]) -> bool:
    """Whether ``info`` carries anything beyond empty per-agent dicts and masking keys."""
    for key, value in info.items():
        if key in agents and (type(value) is dict or isinstance(value, Mapping)):
            if value and any(k not in AGENT_INFO_KEYS for k in value):
                return True
        elif key not in LEGACY_INFO_KEYS:
            return True
    return False


def uses_masking(info: Mapping[str, Any], agents: Sequence[str]) -> bool:
    """Whether ``info`` has any AgileRL masking or turn key (the common case: it has none)."""
    if "agent_mask" in info or "env_defined_actions" in info:
        return True
    for a in agents:
        agent_info = info.get(a)
        if (
            agent_info
            and isinstance(agent_info, Mapping)
            and not AGENT_INFO_KEYS.isdisjoint(agent_info)
        ):
            return True
    return False


class SubEnvRunner:
    """Runs sub-envs ``start .. start + len(envs) - 1`` of a vector env on ``bufs``.

    ``current`` is the global index of the sub-env being called, for error reports.
    """

    def __init__(self, envs: Sequence[Any], start: int, bufs: Buffers, layout: VectorLayout):
        self.envs = list(envs)
        self.start = start
        self.stop = start + len(self.envs)
        self.bufs = bufs
        self.agents = layout.agents
        self._agent_set = frozenset(layout.agents)
        self._obs_fill = {
            a: [(leaf.path, placeholder(leaf.dtype)) for leaf in layout.obs_leaves[a]]
            for a in self.agents
        }
        self._act_shape = {a: layout.act_leaves[a].shape for a in self.agents}
        self._masked = [False] * len(self.envs)  # may sub-env j have env-defined actions set?
        self._state = layout.state is not None
        for a in self.agents:
            bufs.eda[a][self.start : self.stop] = np.nan
        self.current = start

    def reset(self, seeds: Sequence[int | None], options: dict | None) -> list[tuple[int, Info]]:
        """Reset every sub-env of the slice; returns ``(index, info)`` for non-empty infos."""
        out: list[tuple[int, Info]] = []
        self.bufs.ended[self.start : self.stop] = False
        for j, env in enumerate(self.envs):
            i = self.current = self.start + j
            obs, info = env.reset(seed=seeds[j], options=options)
            self._write_obs(i, obs, self.bufs.obs, self.bufs.observed)
            self._write_after(i, env, obs, info, None)
            if self._state:
                self.bufs.state[i] = env.state()  # type: ignore[index]
            if has_content(info, self._agent_set):
                out.append((i, info))
        return out

    def step(self) -> list[tuple[int, Info | None, Info | None]]:
        """Step every sub-env with the actions in ``bufs.action``; autoreset ended ones.

        Returns ``(index, info, final_info)`` for sub-envs with a non-empty info: ``info`` of
        the returned observations (the reset info after an autoreset), ``final_info`` of the
        step that ended an episode.
        """
        bufs = self.bufs
        # One private copy per agent: envs may keep a reference to the action they were given.
        actions = {a: bufs.action[a][self.start : self.stop].copy() for a in self.agents}
        out: list[tuple[int, Info | None, Info | None]] = []
        for j, env in enumerate(self.envs):
            i = self.current = self.start + j
            before = list(env.agents)
            obs, rew, term, trunc, info = env.step({a: actions[a][j] for a in before})
            after = env.agents
            self._write_rewards(i, after, obs, rew, term, trunc)
            ended = not after or all(term.get(a, False) or trunc.get(a, False) for a in before)
            bufs.ended[i] = ended
            final_info = None
            if ended:
                self._write_obs(i, obs, bufs.final_obs, bufs.final_observed)
                final_info = info if has_content(info, self._agent_set) else None
                if self._state:
                    bufs.final_state[i] = env.state()  # type: ignore[index]
                obs, info = env.reset()
            self._write_obs(i, obs, bufs.obs, bufs.observed)
            self._write_after(i, env, obs, info, None if ended else (term, trunc))
            if self._state:
                bufs.state[i] = env.state()  # type: ignore[index]
            info_out = info if has_content(info, self._agent_set) else None
            if info_out is not None or final_info is not None:
                out.append((i, info_out, final_info))
        return out

    def close(self) -> None:
        """Close every sub-env, ignoring errors (used on the way out)."""
        for env in self.envs:
            with contextlib.suppress(Exception):  # closing must not mask the original error
                env.close()

    # -- writers -----------------------------------------------------------------------------

    def _write_obs(
        self,
        i: int,
        obs: Mapping[str, Any],
        target: dict[str, list[np.ndarray]],
        present: dict[str, np.ndarray],
    ) -> None:
        for a in self.agents:
            arrays = target[a]
            value = obs.get(a)
            present[a][i] = value is not None
            if value is None:
                for arr, (_, fill) in zip(arrays, self._obs_fill[a], strict=True):
                    arr[i] = fill
            elif len(arrays) == 1 and not self._obs_fill[a][0][0]:
                arrays[0][i] = value
            else:
                for arr, (path, _) in zip(arrays, self._obs_fill[a], strict=True):
                    arr[i] = get_path(value, path)

    def _write_rewards(
        self,
        i: int,
        after: Sequence[str],
        obs: Mapping[str, Any],
        rew: Mapping[str, Any],
        term: Mapping[str, Any],
        trunc: Mapping[str, Any],
    ) -> None:
        bufs = self.bufs
        for a in self.agents:
            r = rew.get(a)
            bufs.reward[a][i] = 0.0 if r is None else r
            t = term.get(a)
            if t is None:  # missing agent: terminated if it is gone from the env
                t = a not in obs and a not in after
            bufs.term[a][i] = t
            bufs.trunc[a][i] = bool(trunc.get(a, False))

    def _write_after(
        self,
        i: int,
        env: Any,
        obs: Mapping[str, Any],
        info: Mapping,
        done: tuple[Mapping, Mapping] | None,
    ) -> None:
        """Liveness, activity and AgileRL masking of sub-env ``i``'s new observations.

        ``done``: the step's (terminations, truncations), or None after a reset; an agent is
        active when it is observed and not done by this step (it acts at the next step).
        """
        bufs = self.bufs
        live = env.agents
        actives = []
        for a in self.agents:
            bufs.live[a][i] = a in live
            act = a in obs
            if act and done is not None:
                act = not (done[0].get(a, False) or done[1].get(a, False))
            bufs.active[a][i] = act
            actives.append(act)
        masking = uses_masking(info, self.agents)
        if not masking and not self._masked[i - self.start]:  # fast path: no masking keys
            for a, act in zip(self.agents, actives, strict=True):
                bufs.policy[a][i] = act
            return
        self._masked[i - self.start] = masking
        legacy_mask = info.get("agent_mask")
        legacy_eda = info.get("env_defined_actions")
        if not isinstance(legacy_mask, Mapping):
            legacy_mask = None
        if not isinstance(legacy_eda, Mapping):
            legacy_eda = None
        for a, present in zip(self.agents, actives, strict=True):
            agent_info = info.get(a)
            eda = None
            turn = a
            if isinstance(agent_info, Mapping):
                eda = agent_info.get("env_defined_actions")
                turn = agent_info.get("active_agent", a)
            if eda is None and legacy_eda is not None:
                eda = legacy_eda.get(a)
            if legacy_mask is not None and a in legacy_mask:
                policy = bool(legacy_mask[a])
            else:
                policy = eda is None
            policy = policy and present and turn == a
            if eda is not None and present and not policy:
                bufs.eda[a][i] = np.asarray(eda, dtype=np.float64).reshape(self._act_shape[a])
            else:
                bufs.eda[a][i] = np.nan
            bufs.policy[a][i] = policy
