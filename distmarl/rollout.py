"""Env-policy loops, no Ray: collect transitions for the buffer, and evaluate a policy.

Both work on a :class:`~distmarl.envs.VectorParallelEnv` and any algorithm with
``act(obs, explore)`` / ``reset_noise(mask)``. The single-process reference trainer and the
rollout-worker actors share them, so the distributed path steps envs exactly as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distmarl.envs import apply_env_defined_actions, true_next_obs
from distmarl.types import OFF_POLICY_FIELDS


@dataclass
class Rollout:
    """``data[field][agent]`` has shape ``(num_steps * num_envs, ...)``, time-major: row
    ``t * num_envs + e`` is sub-env ``e`` at step ``t``. ``episode_scores`` are the summed
    rewards over agents of the episodes that ended during the collection."""

    data: dict[str, dict[str, np.ndarray]]
    env_steps: int
    episode_scores: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


class EpisodeScores:
    """Running score (rewards summed over agents) and length of each sub-env's episode; an
    ended episode's figures go to ``scores`` / ``lengths`` and the counters restart."""

    def __init__(self, num_envs: int) -> None:
        self.running = np.zeros(num_envs)
        self.steps = np.zeros(num_envs, dtype=np.int64)

    def step(self, rew: Any, agents: list[str], ended: np.ndarray, scores: list[float],
             lengths: list[int]) -> None:
        self.running += sum(np.asarray(rew[a], dtype=np.float64) for a in agents)
        self.steps += 1
        if ended.any():
            scores.extend(self.running[ended].tolist())
            lengths.extend(self.steps[ended].tolist())
            self.running[ended] = 0.0
            self.steps[ended] = 0


class Collector:
    """Steps ``venv`` with ``algo``'s exploring policy and returns whole chunks of transitions.

    The ``next_obs`` of a transition is the true next observation (the final one where an
    episode ended); ``active`` is whether the agent was present when it acted.
    """

    def __init__(self, venv: Any, algo: Any, seed: int | None = None) -> None:
        self.venv, self.algo = venv, algo
        self.agents = list(venv.possible_agents)
        self.obs, self.infos = venv.reset(seed=seed)
        self.episodes = EpisodeScores(venv.num_envs)
        self.total_steps = 0

    def collect(self, num_steps: int) -> Rollout:
        """``num_steps`` vectorised steps: ``num_steps * num_envs`` transitions."""
        rows: dict[str, dict[str, list[Any]]] = {f: {a: [] for a in self.agents}
                                                 for f in OFF_POLICY_FIELDS}
        scores: list[float] = []
        lengths: list[int] = []
        for _ in range(num_steps):
            actions = apply_env_defined_actions(self.algo.act(self.obs, explore=True), self.infos)
            obs, rew, term, trunc, infos = self.venv.step(actions)
            nxt = true_next_obs(obs, infos)
            active = self.infos["active"]
            for a in self.agents:
                for name, value in zip(OFF_POLICY_FIELDS, (self.obs[a], actions[a], rew[a], nxt[a],
                                                           term[a], trunc[a], active[a])):
                    rows[name][a].append(value)
            ended = infos["_final_obs"]
            self.episodes.step(rew, self.agents, ended, scores, lengths)
            if ended.any():
                self.algo.reset_noise(ended)
            self.obs, self.infos = obs, infos
        self.total_steps += num_steps * self.venv.num_envs
        data = {f: {a: _stack_time_major(v) for a, v in per.items()} for f, per in rows.items()}
        return Rollout(data, num_steps * self.venv.num_envs, scores, lengths)


def _stack_time_major(steps: list[Any]) -> Any:
    """``T`` arrays of shape ``(E, ...)`` (or dicts / tuples of them) -> ``(T * E, ...)``."""
    first = steps[0]
    if isinstance(first, dict):
        return {k: _stack_time_major([s[k] for s in steps]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack_time_major([s[i] for s in steps]) for i in range(len(first)))
    arr = np.stack(steps)
    return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])


#: Episodes per sub-env of the reference trainers' progress evaluations (4 x 8 sub-envs = 32
#: episodes: one speaker-listener episode's score varies by about +-60, so 8 were too few).
EVAL_EPISODES_PER_ENV = 4


def progress_score(venv: Any, algo: Any, run_seed: int, env_steps: int) -> float:
    """Mean score of :data:`EVAL_EPISODES_PER_ENV` episodes per sub-env, without exploration,
    on episodes seeded by the run and the step count: distinct across runs and evaluations
    (sub-env ``i`` adds ``i`` to the seed, so nearby seeds would overlap)."""
    seed = (int(run_seed) * 1_000_003 + int(env_steps) * 101) % (2**31 - 1)
    return float(np.mean(evaluate(venv, algo, episodes=EVAL_EPISODES_PER_ENV, seed=seed)))


def evaluate(venv: Any, algo: Any, episodes: int = 1, max_steps: int | None = None,
             seed: int | None = None) -> list[float]:
    """Scores (rewards summed over agents) of ``episodes`` episodes per sub-env, acting without
    exploration. With ``max_steps``, an episode still running then counts with its partial
    score (AgileRL's ``eval_steps``)."""
    obs, infos = venv.reset(seed=seed)
    agents = list(venv.possible_agents)
    running_score = np.zeros(venv.num_envs)
    done = np.zeros(venv.num_envs, dtype=np.int64)
    scores: list[float] = []
    steps = 0
    while (done < episodes).any() and (max_steps is None or steps < max_steps):
        actions = apply_env_defined_actions(algo.act(obs, explore=False), infos)
        obs, rew, _, _, infos = venv.step(actions)
        counting = done < episodes
        running_score += counting * sum(np.asarray(rew[a], dtype=np.float64) for a in agents)
        ended = infos["_final_obs"] & counting
        for i in np.flatnonzero(ended):
            scores.append(float(running_score[i]))
            running_score[i] = 0.0
            done[i] += 1
        steps += 1
    unfinished = done < episodes
    scores.extend(running_score[unfinished].tolist())  # only with max_steps
    return scores
