"""Scoring a policy on a vector env (by default without exploration): for the trainers'
progress, and of a saved member from a checkpoint (no Ray)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from distmarl import tree
from distmarl.algorithms import Acting
from distmarl.checkpoint import load_checkpoint
from distmarl.collect.cancel import NEVER, Cancel, check
from distmarl.config import ExperimentConfig
from distmarl.config.stored import stored_config
from distmarl.envs import apply_env_defined_actions, fold_info_masks
from distmarl.factory import converted, env_spaces, make_algorithm, make_venv

#: Episodes per sub-env of the reference trainers' progress evaluations (4 x 8 sub-envs = 32
#: episodes: one speaker-listener episode's score varies by about +-60, so a handful of episodes
#: would measure mostly luck).
EVAL_EPISODES_PER_ENV = 4


def progress_score(venv: Any, algo: Acting, run_seed: int, env_steps: int) -> float:
    """Mean score of :data:`EVAL_EPISODES_PER_ENV` episodes per sub-env, without exploration,
    on episodes seeded by the run and the step count: distinct across runs and evaluations
    (sub-env ``i`` adds ``i`` to the seed, so nearby seeds would overlap)."""
    seed = (int(run_seed) * 1_000_003 + int(env_steps) * 101) % (2**31 - 1)
    return float(np.mean(evaluate(venv, algo, episodes=EVAL_EPISODES_PER_ENV, seed=seed)))


class Scores(list[float]):
    """Episode scores (a plain list of floats) and ``capped``: how many of those episodes
    the env's step limit (``env.max_episode_steps``) cut unfinished; their scores are partial.
    (Episodes still running at an evaluation's own ``max_steps``, ``evolution.eval_steps``,
    are partial too, as that setting asks, and are not counted.)"""

    capped: int = 0

    def __init__(self, scores: Iterable[float] = (), capped: int = 0) -> None:
        super().__init__(scores)
        self.capped = int(capped)


class Outcomes(NamedTuple):
    """Each agent's return per episode, in :func:`evaluate`'s order, and whether the step
    limit cut each one (see :class:`Scores`)."""

    returns: list[dict[str, float]]
    capped: list[bool]


def evaluate(venv: Any, algo: Acting, episodes: int = 1, max_steps: int | None = None,
             seed: int | None = None, explore: bool = False, cancel: Cancel = NEVER
             ) -> Scores:
    """Scores (rewards summed over agents) of ``episodes`` episodes per sub-env, acting without
    exploration (``explore``: sampling the policy; the caller seeds its stream), in a fixed
    order: sub-env ``i``'s ``k``-th episode at ``k * num_envs + i`` (whichever ends first),
    so a seed names the same episodes for every policy. With
    ``max_steps``, an episode still running then counts with its partial score (AgileRL's
    ``eval_steps``); so does an episode the env's step limit cut (counted in
    :attr:`Scores.capped`). ``cancel``: see :func:`episode_outcomes`."""
    out = episode_outcomes(venv, algo, episodes, max_steps, seed, explore, cancel)
    return Scores([float(sum(r.values())) for r in out.returns], sum(out.capped))


def episode_returns(venv: Any, algo: Acting, episodes: int = 1, max_steps: int | None = None,
                    seed: int | None = None, explore: bool = False) -> list[dict[str, float]]:
    """Each agent's return per episode, in :func:`evaluate`'s order (for games, where the
    sum over agents says nothing: who won)."""
    return episode_outcomes(venv, algo, episodes, max_steps, seed, explore).returns


def episode_outcomes(venv: Any, algo: Acting, episodes: int = 1, max_steps: int | None = None,
                     seed: int | None = None, explore: bool = False, cancel: Cancel = NEVER
                     ) -> Outcomes:
    """:func:`episode_returns`, and which of the episodes the vector env's step limit ended
    (``infos["capped"]``). Episodes still running at ``max_steps`` count with their partial
    returns, not as capped (an episode that had not taken a step then is no episode: left
    out). ``cancel`` is asked before every vector step: once set, the play stops with
    :class:`~distmarl.collect.cancel.Cancelled` (a stop does not wait for long episodes)."""
    obs, infos = venv.reset(seed=seed)
    obs = fold_info_masks(obs, infos)
    agents = list(venv.possible_agents)
    running = {a: np.zeros(venv.num_envs) for a in agents}
    done = np.zeros(venv.num_envs, dtype=np.int64)
    length = np.zeros(venv.num_envs, dtype=np.int64)  # steps of each running episode
    per_env: list[list[tuple[dict[str, float], bool]]] = [[] for _ in range(venv.num_envs)]
    steps = 0
    while (done < episodes).any() and (max_steps is None or steps < max_steps):
        check(cancel)
        actions = apply_env_defined_actions(algo.act(obs, explore=explore), infos)
        obs, rew, _, _, infos = venv.step(actions)
        obs = fold_info_masks(obs, infos)
        counting = done < episodes
        for a in agents:
            running[a] += counting * np.asarray(rew[a], dtype=np.float64)
        length += 1
        ended = infos["_final_obs"] & counting
        capped = infos.get("capped", np.zeros(venv.num_envs, dtype=bool))
        for i in np.flatnonzero(ended):
            per_env[i].append(({a: float(running[a][i]) for a in agents}, bool(capped[i])))
            for a in agents:
                running[a][i] = 0.0
            done[i] += 1
        length[infos["_final_obs"]] = 0
        steps += 1
    for i in np.flatnonzero((done < episodes) & (length > 0)):  # only with max_steps
        per_env[i].append(({a: float(running[a][i]) for a in agents}, False))
    ordered = [s[k] for k in range(episodes) for s in per_env if k < len(s)]
    return Outcomes([r for r, _ in ordered], [c for _, c in ordered])


def fixed_scores(venv: Any, policy: Acting, episodes: int, seed: int, explore: bool = False,
                 cancel: Cancel = NEVER) -> Scores:
    """Scores of exactly ``episodes`` whole episodes seeded by ``seed``: the first
    ``episodes`` of :func:`evaluate`'s order, the same episodes for every policy on a venv of
    the same env config (the final evaluation, and the random policy beside it); those the
    env's step limit cut are counted in :attr:`Scores.capped`. ``cancel``: see
    :func:`episode_outcomes`."""
    per_env = -(-episodes // venv.num_envs)
    out = episode_outcomes(venv, policy, per_env, seed=seed, explore=explore, cancel=cancel)
    return Scores([float(sum(r.values())) for r in out.returns[:episodes]],
                  sum(out.capped[:episodes]))


class RandomPolicy:
    """Uniform random actions from each agent's action space (``seed`` seeds them): the
    baseline a final score is read against."""

    def __init__(self, action_spaces: dict[str, Any], seed: int) -> None:
        self.action_spaces = action_spaces
        for i, space in enumerate(action_spaces.values()):
            space.seed(seed + i)

    def act(self, obs: dict[str, Any], explore: bool = False,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """A uniform action per row, among the legal ones where the observation (or
        ``action_mask``) carries a mask."""
        out = {}
        for a, o in obs.items():
            mask = action_mask.get(a) if action_mask is not None else None
            if mask is None and isinstance(o, Mapping):
                mask = o.get("action_mask")
            out[a] = np.stack([self._sample(a, None if mask is None else mask[i])
                               for i in range(len(tree.first_leaf(o)))])
        return out

    def _sample(self, agent: str, mask: Any) -> Any:
        space = self.action_spaces[agent]
        if mask is None:
            return space.sample()
        legal = np.asarray(mask).astype(np.int8)
        return space.sample(mask=legal if legal.any() else None)


class Seats:
    """Acts for each agent with the policy holding its seat (a trained member against random
    play, or two members against each other); each policy sees only its own agents."""

    def __init__(self, seats: Mapping[str, Acting]) -> None:
        self.seats = dict(seats)

    def act(self, obs: dict[str, Any], explore: bool = False,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for policy in {id(p): p for p in self.seats.values()}.values():
            own = {a: o for a, o in obs.items() if self.seats[a] is policy}
            if own:
                out.update(policy.act(own, explore=explore))
        return out


def evaluate_checkpoint(path: Path, episodes: int | None = None, member: int | None = None,
                        seed: int | None = None) -> dict[str, Any]:
    """Score of a saved member on fixed episodes. The defaults repeat the run's final
    evaluation: its elite (else the best member by last fitness), the config's
    ``evolution.final_episodes`` episodes seeded by ``evolution.final_seed``, on as many
    sub-envs as the run had, acting as its evaluations did (``evolution.eval_explore``), so a
    run's last checkpoint gives its ``final_score`` again. (A league member plays games
    instead: :func:`distmarl.league.saved.evaluate_saved` takes either.)"""
    return score_member(*load_member(path, member, seed), episodes, seed)


def final_defaults(cfg: ExperimentConfig, episodes: int | None, seed: int | None
                   ) -> tuple[int, int]:
    """``(episodes, seed)``, the run's final evaluation's where not given."""
    return (episodes or cfg.evolution.final_episodes or 100,
            cfg.evolution.final_seed if seed is None else seed)


def score_member(cfg: ExperimentConfig, algo: Any, index: int, where: str,
                 episodes: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """:func:`evaluate_checkpoint` on a member :func:`load_member` gave."""
    if cfg.league.enabled:
        raise ValueError("a league run's member plays games, not episodes: use "
                         "distmarl.league.saved.evaluate_saved (distmarl evaluate)")
    episodes, seed = final_defaults(cfg, episodes, seed)
    venv = make_venv(cfg.env, mode="sync", seed=seed)
    explore = cfg.evolution.eval_explore
    if explore:
        algo.reseed(seed)
    try:
        scores = fixed_scores(venv, algo, episodes, seed, explore)
    finally:
        venv.close()
    return {"checkpoint": where, "member": index, "episodes": len(scores), "seed": seed,
            "mean_score": float(np.mean(scores)), "std_score": float(np.std(scores)),
            "capped": scores.capped}


def load_member(path: Path, member: int | None = None, seed: int | None = None
                ) -> tuple[ExperimentConfig, Any, int, str]:
    """A saved member as a policy (an algorithm that only acts): ``(config, policy, member
    index, checkpoint path)``; ``member`` None: the run's elite (see
    :func:`evaluate_checkpoint`)."""
    ckpt = load_checkpoint(path, with_buffer=False)
    cfg = stored_config(ckpt.meta["config"])
    index = _default_member(ckpt.meta) if member is None else member
    if not 0 <= index < len(ckpt.members):
        raise ValueError(f"--member {index} is not a member of {ckpt.path} "
                         f"(0..{len(ckpt.members) - 1})")
    seed = cfg.evolution.final_seed if seed is None else seed
    state = ckpt.members[index]["algo"]
    algo = make_algorithm(converted(cfg.algorithm, state["algorithm"], state["hp"]),
                          env_spaces(cfg.env), seed=seed, learner=False)
    algo.load_state_dict(state)
    return cfg, algo, index, str(ckpt.path)


def _default_member(meta: dict[str, Any]) -> int:
    """The final evaluation's elite when the checkpoint has one, else the best last fitness."""
    if meta.get("final"):
        return int(meta["final"]["elite"])
    fitness = [m["fitness"][-1] if m["fitness"] else float("-inf") for m in meta["members"]]
    return int(np.argmax(fitness))
