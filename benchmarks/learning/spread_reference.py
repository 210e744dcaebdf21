"""Hand-written controllers for mpe2 ``simple_spread_v3``: what a spread score means (not a test).

Scored on the same fixed episodes as :mod:`benchmarks.learning.learning`'s trained members and
baselines (a run's final evaluation: same ``--config`` / ``--set``, ``--episodes`` as its
``--final-episodes``), summed over agents:

* ``greedy``: every agent steers to the landmark nearest to itself. Agents that share a nearest
  landmark crowd it and leave another uncovered: the score of a policy without coordination.
* ``matched``: every agent computes, from its own observation alone, the assignment of agents to
  landmarks with the least total distance (it sees every landmark and every other agent
  relative to itself) and steers to its own landmark. All agents find the same assignment, so
  this is a decentralised policy that covers every landmark: spread's coordination solved.

``--members DIR`` (the runs of a ``python -m benchmarks.learning.learning --out DIR``: each
run's member from its last checkpoint) adds a profile of what each policy does by the end of
an episode, next to the controllers':
the sum over landmarks of the nearest agent's distance, the landmarks with an agent within 0.1
(mpe2's "covered"), and how many different landmarks the agents are nearest to.

Both steer with a PD law ``u = kp * (target - pos) - kd * vel`` mapped onto mpe2's continuous
action ``[no-op, -x, +x, -y, +y]`` in ``[0, 1]`` (the env applies ``u_x = a[2] - a[1]``).

    .venv/bin/python -m benchmarks.learning.spread_reference \
        --config examples/configs/spread_mappo.yaml --episodes 1000 [--members DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import CONFIGS
from benchmarks.learning import learning

SPREAD_CONFIG = CONFIGS / "spread_mappo.yaml"
KP, KD = 4.0, 2.0  # PD gains (the best of 1/0, 1/0.5, 2/1 and 4/2 on 200 episodes)


def spread_parts(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(vel (B, 2), landmarks (B, N, 2), others (B, N - 1, 2))`` of spread observations
    ``(B, 6 N)`` (``[vel, pos, N landmarks, N - 1 other agents, N - 1 comm]``, all relative to
    the observing agent)."""
    n = obs.shape[-1] // 6
    if obs.shape[-1] != 6 * n or n < 1:
        raise ValueError(f"not a simple_spread observation: width {obs.shape[-1]} is not 6 * N")
    landmarks = obs[:, 4:4 + 2 * n].reshape(-1, n, 2)
    others = obs[:, 4 + 2 * n:4 + 2 * n + 2 * (n - 1)].reshape(-1, n - 1, 2)
    return obs[:, :2], landmarks, others


def matched_landmark(landmarks: np.ndarray, others: np.ndarray) -> int:
    """Index of the landmark the observing agent takes in the least-total-distance assignment
    of all agents to landmarks; ``landmarks (N, 2)``, ``others (N - 1, 2)`` relative to it."""
    agents = np.concatenate([np.zeros((1, 2)), others])  # the observing agent first
    dist = np.linalg.norm(agents[:, None] - landmarks[None], axis=-1)  # (agents, landmarks)
    rows = np.arange(len(agents))
    best = min(itertools.permutations(range(len(landmarks))),
               key=lambda perm: float(dist[rows, list(perm)].sum()))
    return int(best[0])


def pd_action(target: np.ndarray, vel: np.ndarray, kp: float = KP, kd: float = KD) -> np.ndarray:
    """mpe2 continuous actions ``(B, 5)`` steering towards ``target`` ``(B, 2)`` (relative)."""
    u = kp * target - kd * vel
    zero = np.zeros(len(u))
    return np.clip(np.stack([zero, -u[:, 0], u[:, 0], -u[:, 1], u[:, 1]], axis=1),
                   0.0, 1.0).astype(np.float32)


class SpreadController:
    """``greedy`` or ``matched`` (see the module docstring); ``act(obs, explore)`` on vectorised
    observations ``{agent: (num_envs, 6 N)}``, as :func:`distmarl.collect.evaluate` calls it."""

    def __init__(self, rule: str) -> None:
        if rule not in ("greedy", "matched"):
            raise ValueError(f"rule must be 'greedy' or 'matched', got {rule!r}")
        self.rule = rule

    def act(self, obs: dict[str, np.ndarray], explore: bool = False) -> dict[str, np.ndarray]:
        out = {}
        for agent, o in obs.items():
            vel, landmarks, others = spread_parts(np.asarray(o, dtype=np.float64))
            if self.rule == "greedy":
                pick = np.linalg.norm(landmarks, axis=-1).argmin(axis=1)
            else:
                pick = np.array([matched_landmark(lm, ot) for lm, ot in zip(landmarks, others)])
            out[agent] = pd_action(landmarks[np.arange(len(o)), pick], vel)
        return out


def reference_scores(config_path: str | Path = SPREAD_CONFIG, sets: Sequence[str] = (),
                     episodes: int = 100) -> dict[str, dict[str, Any]]:
    """``{"greedy" | "matched": fixed_score's {"mean", "std", "episodes"}}`` on the fixed
    evaluation episodes of :mod:`benchmarks.learning.learning` for this config."""
    from distmarl.config import load_config

    cfg = load_config(config_path, [s for s in sets if s.startswith("env.")])
    if "simple_spread" not in cfg.env.spec:
        raise ValueError(f"the controllers are for simple_spread; the config's env is "
                         f"{cfg.env.spec!r}")
    return {rule: learning.fixed_score(cfg, SpreadController(rule), episodes)
            for rule in ("greedy", "matched")}


def end_profile(policy: Any, episodes: int = 200, seed: int = 10_000, max_cycles: int = 25
                ) -> dict[str, float]:
    """Means over ``episodes`` single-env spread episodes (seeds ``seed + i``, actions without
    exploration) of the score summed over agents and, at the episode's last step:
    ``sum_min_dist`` (sum over landmarks of the nearest agent's distance), ``covered`` (landmarks
    with an agent within 0.1) and ``distinct`` (different landmarks among the agents' nearest)."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=max_cycles)
    rows = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        score = 0.0
        while env.agents:
            act = policy.act({a: o[None] for a, o in obs.items()}, explore=False)
            obs, rew, _, _, _ = env.step({a: act[a][0] for a in env.agents})
            score += float(sum(rew.values()))
        world = env.unwrapped.world  # as the last step left it (no reset yet)
        agents = np.array([a.state.p_pos for a in world.agents])
        landmarks = np.array([lm.state.p_pos for lm in world.landmarks])
        dist = np.linalg.norm(agents[:, None] - landmarks[None], axis=-1)  # (agents, landmarks)
        rows.append((score, dist.min(0).sum(), (dist.min(0) < 0.1).sum(),
                     len(set(dist.argmin(1).tolist()))))
    env.close()
    return dict(zip(("score", "sum_min_dist", "covered", "distinct"),
                    (float(x) for x in np.mean(rows, axis=0)), strict=True))


def saved_members(out: str | Path) -> dict[str, Any]:
    """``{"<algo> seed <seed>": policy}`` for every run of a learning benchmark's ``--out``
    (``<algo>/seed-<s>``), its member from its last checkpoint."""
    from distmarl.collect.evaluation import load_member

    runs = sorted(Path(out).glob("*/seed-*/checkpoints"))
    if not runs:
        raise FileNotFoundError(f"no runs with checkpoints (<algo>/seed-<s>) in {out}")
    return {f"{ckpt.parent.parent.name} seed {ckpt.parent.name.removeprefix('seed-')}":
            load_member(ckpt)[1] for ckpt in runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(SPREAD_CONFIG))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--members", default=None, metavar="DIR")
    parser.add_argument("--profile-episodes", type=int, default=200)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    for flag, value in (("--episodes", args.episodes),
                        ("--profile-episodes", args.profile_episodes)):
        if value < 1:
            parser.error(f"{flag} must be at least 1, got {value}")
    scores = reference_scores(args.config, args.set, args.episodes)
    for rule, s in scores.items():
        print(f"{rule:8s} controller: {s['mean']:6.1f} (std {s['std']:.1f}, {s['episodes']} "
              f"episodes)")
    policies = {f"{rule} controller": SpreadController(rule) for rule in ("greedy", "matched")}
    if args.members:
        policies.update(saved_members(args.members))
    profiles = {}
    print(f"\nat the end of {args.profile_episodes} episodes (single env, seeds 10000+):")
    print(f"{'policy':20s} {'score':>7s} {'sum min dist':>13s} {'covered':>8s} {'distinct':>9s}")
    for name, policy in policies.items():
        p = profiles[name] = end_profile(policy, args.profile_episodes)
        print(f"{name:20s} {p['score']:7.1f} {p['sum_min_dist']:13.2f} {p['covered']:6.2f}/3 "
              f"{p['distinct']:7.2f}/3")
    if args.json:
        Path(args.json).write_text(json.dumps({"scores": scores, "profiles": profiles},
                                              indent=2))


if __name__ == "__main__":
    main()
