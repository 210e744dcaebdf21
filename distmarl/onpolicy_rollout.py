"""The on-policy env-policy loop, no Ray: rollout fragments with behaviour log-probs and values.

:class:`OnPolicyCollector` is :class:`distmarl.rollout.Collector` for IPPO / MAPPO: it acts with
``algo.act_with_info`` and records ``ON_POLICY_FIELDS`` (the off-policy fields plus ``log_prob``
and ``value``; plus ``STATE_FIELDS`` for an algorithm whose value networks read the env's global
state, from a vector env made with ``record_state=True``) in the same time-major layout;
:func:`fragment_to_batch` turns such rows into the ``(T, E, ...)`` tensors ``algo.learn`` takes. Usage (the single-process loop)::

    collector = OnPolicyCollector(venv, algo, seed=0)
    rollout = collector.collect(algo.hp["learn_step"])       # one fragment
    metrics = algo.learn(fragment_to_batch(rollout.data, venv.num_envs))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from distmarl.envs import apply_env_defined_actions, true_next_obs, true_next_state
from distmarl.rollout import EpisodeScores, Rollout, _stack_time_major
from distmarl.types import on_policy_fields


class OnPolicyCollector:
    """Steps ``venv`` with ``algo``'s stochastic policy and returns whole rollout fragments.

    Per transition: ``next_obs`` is the true next observation (the final one where an episode
    ended); ``log_prob`` / ``value`` are the behaviour policy's, for the stored action and
    ``obs``; ``active`` is whether the agent acted *with its own policy* (present, and no
    env-defined action replaced its choice, since the recorded log-prob is of the policy's own
    sample). Action masks that the env gives in ``infos[agent]["action_mask"]`` are used for
    acting and stored inside ``obs`` as ``{"observation": ..., "action_mask": ...}`` (the form
    PettingZoo's dict observations already have), so the learner sees the same masks. When
    ``algo.uses_state``, ``state`` / ``next_state`` (the global state before the step and the
    true one after it) are stored under every agent.
    """

    def __init__(self, venv: Any, algo: Any, seed: int | None = None) -> None:
        self.venv, self.algo = venv, algo
        self.agents = list(venv.possible_agents)
        self.uses_state = bool(getattr(algo, "uses_state", False))
        if self.uses_state and getattr(venv, "state_space", None) is None:
            raise ValueError(f"{algo.name} reads the env's global state: make the vector env "
                             f"with record_state=True")
        self.fields = on_policy_fields(self.uses_state)
        obs, self.infos = venv.reset(seed=seed)
        self.obs = _with_info_masks(obs, self.infos)
        self.episodes = EpisodeScores(venv.num_envs)
        self.total_steps = 0

    def collect(self, num_steps: int) -> Rollout:
        """``num_steps`` vectorised steps: ``num_steps * num_envs`` transitions per agent, rows
        time-major (row ``t * num_envs + e``)."""
        rows: dict[str, dict[str, list[Any]]] = {f: {a: [] for a in self.agents}
                                                 for f in self.fields}
        scores: list[float] = []
        lengths: list[int] = []
        for _ in range(num_steps):
            state = self.infos["state"] if self.uses_state else None
            chosen, extras = self.algo.act_with_info(self.obs, state=state)
            actions = apply_env_defined_actions(chosen, self.infos)
            obs, rew, term, trunc, infos = self.venv.step(actions)
            nxt = true_next_obs(obs, infos)
            states = (state, true_next_state(infos)) if self.uses_state else ()
            own = self.infos.get("agent_mask", {})
            for a in self.agents:
                active = np.asarray(self.infos["active"][a], dtype=bool)
                if a in own:
                    active = active & np.asarray(own[a], dtype=bool)
                values = (self.obs[a], actions[a], rew[a], nxt[a], term[a], trunc[a], active,
                          extras["log_prob"][a], extras["value"][a], *states)
                for name, value in zip(self.fields, values, strict=True):
                    rows[name][a].append(value)
            self.episodes.step(rew, self.agents, infos["_final_obs"], scores, lengths)
            self.obs, self.infos = _with_info_masks(obs, infos), infos
        self.total_steps += num_steps * self.venv.num_envs
        data = {f: {a: _stack_time_major(v) for a, v in per.items()} for f, per in rows.items()}
        return Rollout(data, num_steps * self.venv.num_envs, scores, lengths)


def _with_info_masks(obs: Mapping[str, Any], infos: Mapping[str, Any]) -> dict[str, Any]:
    """``obs`` with ``infos[agent]["action_mask"]`` folded in as ``{"observation",
    "action_mask"}`` where the env reports masks there (sub-envs that did not: all legal)."""
    out = dict(obs)
    for a, x in obs.items():
        info = infos.get(a)
        if isinstance(x, Mapping) or not isinstance(info, Mapping) or "action_mask" not in info:
            continue
        mask = np.asarray(info["action_mask"])
        reported = np.asarray(info.get("_action_mask", np.ones(len(mask), dtype=bool)), bool)
        mask = np.where(reported.reshape(-1, *([1] * (mask.ndim - 1))), mask, 1).astype(np.int8)
        out[a] = {"observation": x, "action_mask": mask}
    return out


def fragment_to_batch(data: Mapping[str, Mapping[str, Any]], num_envs: int,
                      device: str | torch.device | None = None
                      ) -> dict[str, dict[str, Any]]:
    """Rows ``(T * E, ...)`` (time-major, as :meth:`OnPolicyCollector.collect` and the buffer give
    them) -> tensors ``(T, E, ...)`` for ``algo.learn``; dict observations are mapped leaf by
    leaf, bools become float32 0/1."""
    return {f: {a: _time_major(v, num_envs, device) for a, v in per.items()}
            for f, per in data.items()}


def _time_major(x: Any, num_envs: int, device: str | torch.device | None) -> Any:
    if isinstance(x, Mapping):
        return {k: _time_major(v, num_envs, device) for k, v in x.items()}
    arr = np.asarray(x)
    if arr.shape[0] % num_envs:
        raise ValueError(f"{arr.shape[0]} rows do not split into steps of {num_envs} sub-envs")
    t = torch.from_numpy(np.ascontiguousarray(arr).copy())
    if t.dtype == torch.bool:
        t = t.float()
    t = t.reshape(arr.shape[0] // num_envs, num_envs, *arr.shape[1:])
    return t if device is None else t.to(device)
