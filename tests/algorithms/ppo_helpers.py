"""Spaces (one shared group plus a loner), fixed time-major fragments and a toy env with action
masks in its infos, for the IPPO / MAPPO tests."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from distmarl.algorithms import IPPO, MAPPO, ON_POLICY_FIELDS
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent

#: three agents of group "agent" (shared networks) and one of group "speaker"
AGENTS = ["agent_0", "agent_1", "agent_2", "speaker_0"]
OBS = {**{f"agent_{i}": spaces.Box(-np.inf, np.inf, (6,), np.float32) for i in range(3)},
       "speaker_0": spaces.Box(-np.inf, np.inf, (3,), np.float32)}
BOX_ACT = {**{f"agent_{i}": spaces.Box(0.0, 1.0, (2,), np.float32) for i in range(3)},
           "speaker_0": spaces.Box(-2.0, 2.0, (3,), np.float32)}
DISCRETE_ACT = {**{f"agent_{i}": spaces.Discrete(4) for i in range(3)},
                "speaker_0": spaces.Discrete(3, start=1)}
MIXED_ACT = {**BOX_ACT, "speaker_0": spaces.Discrete(3, start=1)}
ACTION_SETS = {"box": BOX_ACT, "discrete": DISCRETE_ACT, "mixed": MIXED_ACT}
NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [32]},
       "head_config": {"hidden_size": [32]}}
ALGOS = {"IPPO": IPPO, "MAPPO": MAPPO}


def make(algo: str = "IPPO", actions: str = "mixed", seed: int = 0, **hp: Any
         ) -> OnPolicyMultiAgent:
    return ALGOS[algo](OBS, ACTION_SETS[actions], NET, hp=hp or None, seed=seed)


def observations(num_envs: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {a: rng.standard_normal((num_envs, *s.shape)).astype(np.float32)
            for a, s in OBS.items()}


def fragment(algo: OnPolicyMultiAgent, t: int = 16, e: int = 4, seed: int = 0
             ) -> dict[str, dict[str, torch.Tensor]]:
    """A fixed ``(T, E, ...)`` fragment acted by ``algo``'s behaviour policy (so stored log-probs,
    values and next values are its own), random rewards, an episode end every 5 steps
    (truncation in even sub-envs, termination in odd ones), every row active."""
    rng = np.random.default_rng(seed)
    obs = [observations(e, seed=seed * 1000 + k) for k in range(t + 1)]
    out: dict[str, dict[str, list]] = {f: {a: [] for a in AGENTS} for f in ON_POLICY_FIELDS}
    ended = np.zeros((t, e), dtype=bool)
    ended[4::5] = True
    for k in range(t):
        actions, extras = algo.act_with_info(obs[k])
        next_value = algo.value_estimates(obs[k + 1])
        for a in AGENTS:
            row = (obs[k][a], actions[a], rng.standard_normal(e).astype(np.float32),
                   ended[k] & (np.arange(e) % 2 == 1), ended[k] & (np.arange(e) % 2 == 0),
                   np.ones(e, dtype=bool), extras["log_prob"][a], extras["value"][a],
                   next_value[a])
            for f, v in zip(ON_POLICY_FIELDS, row):
                out[f][a].append(v)
    return {f: {a: torch.as_tensor(np.stack(v)) for a, v in per.items()}
            for f, per in out.items()}


def params(algo: OnPolicyMultiAgent) -> dict[str, torch.Tensor]:
    """Every online parameter and log-std, cloned, by ``<net>/<param>``."""
    out = {f"{n}/{k}": v.detach().clone() for n, net in algo.nets.online.items()
           for k, v in net.named_parameters()}
    out.update({f"log_std/{g}": p.detach().clone() for g, p in algo.log_std.items()})
    return out


class MaskedInfoEnv(ParallelEnv):
    """Two agents of one group, Discrete(4) actions; ``info[agent]["action_mask"]`` allows only
    action ``(t + k) % 4`` for agent ``k`` at step ``t``; 6-step episodes (truncated). An illegal
    action raises, so a collector that ignores the masks fails."""

    metadata: ClassVar[dict[str, Any]] = {"name": "masked_info_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["bob_0", "bob_1"]
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-10.0, 10.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(4)

    def _legal(self, k: int) -> int:
        return (self.t + k) % 4

    def _observe(self) -> tuple[dict, dict]:
        obs = {a: np.array([self.t, k], np.float32) for k, a in enumerate(self.agents)}
        infos = {a: {"action_mask": np.eye(4, dtype=np.int8)[self._legal(k)]}
                 for k, a in enumerate(self.agents)}
        return obs, infos

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._observe()

    def step(self, actions: dict[str, Any]) -> tuple:
        for k, a in enumerate(self.agents):
            if int(actions[a]) != self._legal(k):
                raise ValueError(f"illegal action {actions[a]} for {a} at step {self.t}")
        self.t += 1
        done = self.t >= 6
        obs, infos = self._observe()
        rew = dict.fromkeys(self.agents, 1.0)
        term = dict.fromkeys(self.agents, False)
        trunc = dict.fromkeys(self.agents, done)
        if done:
            self.agents = []
        return obs, rew, term, trunc, infos
