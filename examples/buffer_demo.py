"""A short demo of the shared replay buffer on a local Ray.

Two rollout actors step real mpe2 speaker-listener envs with random actions and write whole
chunks to one ReplayBufferActor, tagged with their population member; two learner-like readers
sample mixed batches (half new rows, half replay) as independent consumers. The buffer is then
saved to an Arrow file, loaded back, and its contents checked.

    .venv/bin/python examples/buffer_demo.py [--steps 400] [--out runs/buffer-demo]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import ray

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.runtime.actors.buffer import make_buffer_actor
from distmarl.runtime.driver.cluster import init_ray
from distmarl.types import ReadSpec, SampleRequest, TransitionChunk

FIELDS = ["obs", "action", "reward", "next_obs", "terminated", "truncated"]
NUM_ENVS = 4


@ray.remote(num_cpus=0)
class RandomRollout:
    """Steps NUM_ENVS speaker-listener envs with random actions; one chunk per env step."""

    def __init__(self, buffer, member: int, seed: int) -> None:
        from mpe2 import simple_speaker_listener_v4

        self.envs = [simple_speaker_listener_v4.parallel_env(continuous_actions=True, max_cycles=25)
                     for _ in range(NUM_ENVS)]
        self.buffer, self.member = buffer, member
        self.obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
        for i, env in enumerate(self.envs):
            for agent in env.possible_agents:
                env.action_space(agent).seed(seed + i)
        self.episode_returns: list[float] = []
        self._returns = np.zeros(NUM_ENVS)

    def run(self, steps: int) -> int:
        agents = self.envs[0].possible_agents
        for _ in range(steps):
            chunk = {f: {a: [] for a in agents} for f in FIELDS}
            for i, env in enumerate(self.envs):
                actions = {a: env.action_space(a).sample() for a in agents}
                next_obs, rew, term, trunc, _ = env.step(actions)
                for a in agents:
                    for f, v in zip(FIELDS, (self.obs[i][a], actions[a], rew[a], next_obs[a],
                                             term[a], trunc[a])):
                        chunk[f][a].append(v)
                self._returns[i] += sum(rew.values())
                if all(term[a] or trunc[a] for a in agents):
                    self.episode_returns.append(float(self._returns[i]))
                    self._returns[i] = 0.0
                    next_obs, _ = env.reset()
                self.obs[i] = next_obs
            data = {f: {a: np.asarray(v) for a, v in per.items()} for f, per in chunk.items()}
            ray.get(self.buffer.add.remote(TransitionChunk(data, self.member)))
        return steps * NUM_ENVS

    def mean_return(self) -> float:
        return float(np.mean(self.episode_returns)) if self.episode_returns else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="env steps per rollout actor")
    parser.add_argument("--out", type=Path, default=Path("runs/buffer-demo"))
    args = parser.parse_args()

    start = time.perf_counter()
    info = init_ray(num_cpus=2, dashboard=False, log_to_driver=False)
    print(f"ray: local instance at {info['address']}")
    agents = ["speaker_0", "listener_0"]
    buffer = make_buffer_actor({"memory_size": 100_000, "field_names": FIELDS, "agent_ids": agents,
                                "replay_ratio": 0.5, "learning_starts": 256, "seed": 0}, num_cpus=0)
    rollouts = [RandomRollout.remote(buffer, member=m, seed=100 * m) for m in range(2)]
    pending = [r.run.remote(args.steps) for r in rollouts]

    new_rows = {f"learner-{m}": 0 for m in range(2)}
    batches = 0
    while pending:
        _, pending = ray.wait(pending, timeout=0.05)
        requests = [SampleRequest(name, 256, 4, ReadSpec.mixin(0.5)) for name in new_rows]
        for name, got in zip(new_rows, ray.get(buffer.sample.remote(requests)), strict=True):
            for batch in got:
                new_rows[name] += batch.num_new
                batches += 1
    stats = ray.get(buffer.stats.remote())
    returns = ray.get([r.mean_return.remote() for r in rollouts])
    print(f"stored {stats['size']} rows from {len(rollouts)} rollout actors "
          f"({stats['counter']} added); random play scores {np.nanmean(returns):.1f} per episode")
    for name, c in stats["consumers"].items():
        print(f"  {name}: {c['received_new']} new rows received in {batches // 2} batches, "
              f"{c['pending']} pending, {c['dropped']} dropped")

    path = ray.get(buffer.save.remote(str((args.out / "buffer.arrow").resolve())))
    loaded = MultiAgentReplayBuffer.load(path)
    members = np.bincount(loaded.state_dict()["columns"]["__member__"])
    assert len(loaded) == stats["size"] and loaded.counter == stats["counter"]
    print(f"saved to {path} and loaded back: {len(loaded)} rows, rows per member {members.tolist()}")
    ray.shutdown()
    print(f"done in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
