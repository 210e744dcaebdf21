"""The env-policy loop, no Ray: steps a vector env with an algorithm's exploring policy and
returns whole chunks of transitions for the buffer.

One :class:`Collector` serves both families; the :class:`~distmarl.types.RolloutSpec` it is
given (by default the algorithm's own ``spec``) picks how a step acts and what it records:

* off-policy (MADDPG, MATD3): ``algo.act(obs, explore=True)``, the ``OFF_POLICY_FIELDS``, and
  exploration noise restarted in sub-envs whose episode ended (``algo.reset_noise``);
* on-policy (IPPO, MAPPO): ``algo.act_with_info`` and ``ON_POLICY_FIELDS`` (the behaviour
  policy's ``log_prob``, ``value`` and ``next_value`` instead of the next observation; plus
  ``STATE_FIELDS`` when the spec's ``global_state``, from a vector env made with
  ``global_state=True``); :func:`fragment_to_batch` turns such rows into the ``(T, E, ...)``
  tensors ``algo.learn`` takes.

The single-process trainers and the rollout-worker actors share it, so the distributed path
steps envs exactly as the reference. Usage::

    collector = Collector(venv, algo, seed=0)
    rollout = collector.collect(algo.hp["learn_step"])   # on-policy: one fragment
    metrics = algo.learn(fragment_to_batch(rollout.data, venv.num_envs))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from distmarl import tree
from distmarl.algorithms import Algorithm, FragmentLearner
from distmarl.collect.nstep import NStepWindow
from distmarl.collect.rows import ChunkRows
from distmarl.collect.seats import LearnerEverywhere, MatchResult, SeatPlan
from distmarl.envs import (
    apply_env_defined_actions,
    fold_info_masks,
    true_next_obs,
    true_next_state,
)
from distmarl.types import RolloutSpec

#: the seats of a run without a league (stateless, so one serves every collector)
NO_LEAGUE = LearnerEverywhere()


@dataclass
class Rollout:
    """``data[field][agent]`` has shape ``(num_steps * num_envs, ...)``, time-major: row
    ``t * num_envs + e`` is sub-env ``e`` at step ``t`` (n-step rows: those completed, by
    their first step). ``episode_scores`` are the summed
    rewards over agents of the episodes that ended during the collection."""

    data: dict[str, dict[str, np.ndarray]]
    env_steps: int
    episode_scores: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    #: league games that ended: (learner, opponent, the learner's result)
    match_results: list[MatchResult] = field(default_factory=list)
    #: episodes among those that ended which the env's step limit cut (their agents truncated)
    capped: int = 0


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

    Per transition: ``next_obs`` (off-policy) is the true next observation (the final one where
    an episode ended); ``next_value`` (on-policy) is the behaviour value network's estimate of
    it: the next step's ``value`` inside an episode (filled in when that step acts, or at the
    end of :meth:`collect`), an extra estimate of the final observation where one ended.
    Off-policy, ``active`` is whether the agent was present when it acted. On-policy,
    ``log_prob`` / ``value`` are the behaviour policy's, for the stored action and ``obs``, and
    ``active`` is whether the agent acted *with its own policy* (present, and no env-defined
    action replaced its choice, since the recorded log-prob is of the policy's own sample);
    action masks that the env gives in ``infos[agent]["action_mask"]`` are used for acting and
    stored inside ``obs`` as ``{"observation": ..., "action_mask": ...}`` (the form PettingZoo's
    dict observations already have), so the learner sees the same masks; when
    the spec's ``global_state``, ``state`` (the global state before the step) is stored under
    every agent.

    Its ``seating`` says who acts where: the learner everywhere, or (a league's
    :class:`~distmarl.league.seating.Seating`) opponents in the seats they hold, sampling their
    policies, with only the learner's own seats ``active``.
    """

    def __init__(self, venv: Any, algo: Algorithm, seed: int | None = None,
                 seating: SeatPlan = NO_LEAGUE, spec: RolloutSpec | None = None) -> None:
        self.venv = venv
        self.seating = seating
        self.agents = list(venv.possible_agents)
        #: what the rows record: the run's (the global state where any member sharing the
        #: buffer reads it, n-step rows), else the algorithm's own
        self.spec = algo.spec if spec is None else spec
        if self.spec.global_state and venv.state_space is None:
            raise ValueError(f"{algo.name}'s rows record the env's global state: make the "
                             "vector env with global_state=True")
        self.on_policy, self.fields = self.spec.on_policy, self.spec.fields
        self.set_algorithm(algo)
        self._step = self._on_policy_step if self.on_policy else self._off_policy_step
        #: off-policy with n_step > 1: rows leave as n-step rows (:mod:`distmarl.collect.nstep`)
        n_step = self.spec.n_step
        self.window = NStepWindow(n_step, venv.num_envs) if n_step > 1 else None
        obs, self.infos = venv.reset(seed=seed)
        self.obs = fold_info_masks(obs, self.infos)
        self.episodes = EpisodeScores(venv.num_envs)
        self.total_steps = 0
        #: the last step's ``next_value`` rows, NaN where the next step's ``value`` goes
        self._pending: dict[str, np.ndarray] | None = None

    def set_algorithm(self, algo: Algorithm) -> None:
        """Act with ``algo`` from now on (a member that took another algorithm's state); it
        must be of the rows' family, and read the global state only where they record it."""
        own = algo.spec
        if own.on_policy != self.on_policy or (own.global_state and not self.spec.global_state):
            raise ValueError(f"{algo.name} stores {own.fields}, these rows {self.fields}")
        if own.on_policy != isinstance(algo, FragmentLearner):
            raise TypeError(f"{algo.name}: an on-policy algorithm is a FragmentLearner")
        #: the algorithm's own spec: whether it reads the global state the rows record
        self.algo, self.own = algo, own

    @property
    def learner(self) -> FragmentLearner:
        """The on-policy algorithm (checked in :meth:`set_algorithm`)."""
        return cast(FragmentLearner, self.algo)

    def set_seating(self, seating: SeatPlan) -> None:
        """Play league games from now on: ``seating``'s opponents hold their seats."""
        self.seating = seating

    def collect(self, num_steps: int) -> Rollout:
        """``num_steps`` vectorised steps: ``num_steps * num_envs`` transitions per agent, rows
        time-major (row ``t * num_envs + e``)."""
        rows = ChunkRows(self.fields, self.agents, num_steps)
        scores: list[float] = []
        lengths: list[int] = []
        results: list[MatchResult] = []
        ended = np.zeros((num_steps, self.venv.num_envs), dtype=bool)
        capped = 0
        for t in range(num_steps):
            rew, infos = self._step(rows, t)
            ended[t] = infos["_final_obs"]
            cut = np.asarray(infos.get("capped", np.zeros_like(ended[t])), dtype=bool)
            capped += int(cut.sum())
            self.episodes.step(rew, self.agents, infos["_final_obs"], scores, lengths)
            results += self.seating.step(rew, ended[t], cut)
        if self.on_policy:  # the last step's next values: estimates of the current observations
            state = self.infos["state"] if self.own.global_state else None
            self._fill_next_values(self.learner.value_estimates(self.obs, state))
        self.total_steps += num_steps * self.venv.num_envs
        data = rows.data() if self.window is None else self.window.add(rows.data(), ended)
        return Rollout(data, num_steps * self.venv.num_envs, scores, lengths, results, capped)

    def _seated(self, actions: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray],
                                                               dict[str, np.ndarray] | None]:
        """``actions`` with the opponents' for their seats, and the learner's rows per agent
        (None: every row is the learner's)."""
        mine = self.seating.learner_rows(self.agents)
        return self.seating.override(actions, self.obs, explore=True), mine

    def _off_policy_step(self, rows: ChunkRows, t: int) -> tuple[Any, Any]:
        """One vectorised step of an off-policy algorithm; writes its rows as step ``t``, returns
        ``(rewards, infos)``."""
        chosen, mine = self._seated(self.algo.act(self.obs, explore=True))
        actions = apply_env_defined_actions(chosen, self.infos)
        obs, rew, term, trunc, infos = self.venv.step(actions)
        # the next state's legal actions are the ones the target actor may bootstrap from
        # (at an episode's end: the reset observation's, which only a truncation reads)
        nxt = fold_info_masks(true_next_obs(obs, infos), infos)
        active = self.infos["active"]
        for a in self.agents:
            act = active[a] if mine is None else np.asarray(active[a], dtype=bool) & mine[a]
            for name, value in zip(self.fields, (self.obs[a], actions[a], rew[a], nxt[a],
                                                 term[a], trunc[a], act), strict=True):
                rows.put(t, name, a, value)
        ended = infos["_final_obs"]
        if ended.any():
            self.algo.reset_noise(ended)
        self.obs, self.infos = fold_info_masks(obs, infos), infos
        return rew, infos

    def _on_policy_step(self, rows: ChunkRows, t: int) -> tuple[Any, Any]:
        """One vectorised step of an on-policy algorithm (with the behaviour log-probs and
        values, and the global state when it reads one); writes its rows as step ``t``,
        returns ``(rewards, infos)``. Its ``next_value`` rows stay pending (the stored rows
        themselves) until the next step's values fill them."""
        state = self.infos["state"] if self.spec.global_state else None
        chosen, extras = self.learner.act_with_info(self.obs,
                                                    state=state if self.own.global_state else None)
        self._fill_next_values(extras["value"])
        chosen, mine = self._seated(chosen)
        actions = apply_env_defined_actions(chosen, self.infos)
        obs, rew, term, trunc, infos = self.venv.step(actions)
        next_value = self._final_values(obs, infos)
        own = self.infos.get("agent_mask", {})
        for a in self.agents:
            active = np.asarray(self.infos["active"][a], dtype=bool)
            if a in own:
                active = active & np.asarray(own[a], dtype=bool)
            if mine is not None:
                active = active & mine[a]
            values = (self.obs[a], actions[a], rew[a], term[a], trunc[a], active,
                      extras["log_prob"][a], extras["value"][a], next_value[a],
                      *((state,) if self.spec.global_state else ()))
            for name, value in zip(self.fields, values, strict=True):
                stored = rows.put(t, name, a, value)
                if name == "next_value":
                    next_value[a] = stored
        self._pending = next_value
        self.obs, self.infos = fold_info_masks(obs, infos), infos
        return rew, infos

    def _final_values(self, obs: Any, infos: Any) -> dict[str, np.ndarray]:
        """``next_value`` rows of a step: the behaviour value of the final observation where an
        episode ended, NaN (filled by the next step's values) elsewhere."""
        ended = np.asarray(infos["_final_obs"], dtype=bool)
        out = {a: np.full(self.venv.num_envs, np.nan, np.float32) for a in self.agents}
        if ended.any():
            state = true_next_state(infos) if self.own.global_state else None
            finals = self.learner.value_estimates(true_next_obs(obs, infos), state)
            for a, v in finals.items():
                out[a][ended] = v[ended]
        return out

    def _fill_next_values(self, values: Mapping[str, np.ndarray]) -> None:
        """The pending ``next_value`` rows take ``values`` (this step's estimates) where no
        episode ended; an agent without an estimate (gone from the env) gets 0, which nothing
        reads (its last row was terminal)."""
        if self._pending is None:
            return
        for a, row in self._pending.items():
            hole = np.isnan(row)
            row[hole] = values[a][hole] if a in values else 0.0
        self._pending = None


def fragment_to_batch(data: Mapping[str, Mapping[str, Any]], num_envs: int,
                      device: str | torch.device | None = None
                      ) -> dict[str, dict[str, Any]]:
    """Rows ``(T * E, ...)`` (time-major, as :meth:`Collector.collect` and the buffer give them)
    -> tensors ``(T, E, ...)`` for an on-policy ``algo.learn``; dict observations are mapped
    leaf by leaf, bools become float32 0/1."""
    return {f: {a: tree.map(lambda x: _time_major(x, num_envs, device), v)
                for a, v in per.items()}
            for f, per in data.items()}


def _time_major(x: Any, num_envs: int, device: str | torch.device | None) -> torch.Tensor:
    """One leaf's rows ``(T * E, ...)`` as a tensor ``(T, E, ...)`` (bools as float32)."""
    arr = np.asarray(x)
    if arr.shape[0] % num_envs:
        raise ValueError(f"{arr.shape[0]} rows do not split into steps of {num_envs} sub-envs")
    t = torch.from_numpy(np.ascontiguousarray(arr).copy())
    if t.dtype == torch.bool:
        t = t.float()
    t = t.reshape(arr.shape[0] // num_envs, num_envs, *arr.shape[1:])
    return t if device is None else t.to(device)
