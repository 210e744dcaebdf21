"""The plumbing's ceiling: env steps/s and sampled rows/s that the replay buffer and a
coordinator sustain when nothing else costs anything.

The main job's rows (a chunk its real rollout worker collected once, stored again and again:
no env stepping), its batch size and ``learn_step`` (so its update-to-data rule), on a local
Ray:

- writers: actors that store that chunk for their members when the coordinator asks, one
  collect call per chunk, retrying while the buffer makes a writer wait (a learner owes too
  many updates), as rollout workers do;
- readers: actors standing in for the learner processes, each reading its members' granted
  batches one round ahead (one buffer call per round for all its members, packed, as a
  learner group reads) and sending back random TD errors as priorities, with no arithmetic;
- the coordinator: this process, keeping one collect call in flight per member.

``--shards N`` spreads the buffer over N replay shards as a run does (each shard a buffer actor
with its share of the capacity and limits; the writers' chunks go to the shards in turn, each
reader's round goes to every shard at once: :mod:`distmarl.buffers.shards`); ``--nodes 2`` runs
it on a two-node Ray cluster started on this machine (Ray's own ``cluster_utils``), the shards
spread over the nodes. Prints, per point, the env steps (rows per agent) stored per second and
the rows sampled per second over ``--seconds``, with the main job's sampled rows/s beside them:
at its env steps/s measured first in the same run (``--main-job-steps`` env steps per member,
one run with each of ``--main-job-shards``; the ratios are against its one-shard run), or given
(``--main-job-rate``).

    .venv/bin/python -m benchmarks.system.plumbing [--members 4 16 64] [--shards 1 2 4]
        [--seconds 10] [--readers 2] [--writers 2] [--nodes 1]
        [--main-job-steps 20000 [--main-job-shards 1 2] | --main-job-rate 1400]
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

import numpy as np
import ray

from benchmarks import CONFIGS
from benchmarks.micro.against import ROOT
from benchmarks.system.main_job_against import learner_time
from benchmarks.system.main_job_against import run as main_job
from distmarl.buffers.grants import UpdateGrants
from distmarl.buffers.shards import ShardLayout
from distmarl.config import load_config
from distmarl.config.replay import UpdateRule
from distmarl.runtime.actors.buffer import chunk_rows, make_buffer_actor
from distmarl.runtime.actors.clients import BufferClient, Later, RemoteBuffer
from distmarl.runtime.actors.group import ROUND_UPDATES as ROUND
from distmarl.runtime.actors.shards import sharded
from distmarl.runtime.coordinator.run import max_owed
from distmarl.types import Pace, PriorityUpdate, ReadSpec, SampleRequest, TransitionChunk

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"


def main_job_parts() -> tuple[dict[str, Any], dict[str, Any], int, float, int, UpdateRule,
                              int]:
    """The main job's buffer arguments, one chunk of its rows (collected by its real worker
    code once), the chunk's env steps, ``learn_step``, ``batch_size``, update rule and
    ``max_owed``."""
    from distmarl.collect import Collector
    from distmarl.factory import buffer_kwargs, env_spaces, make_algorithm, make_venv, rollout_spec

    cfg = load_config(CONFIG)
    spaces = env_spaces(cfg.env)
    spec = rollout_spec(cfg, spaces)
    algo = make_algorithm(cfg.algorithm, spaces, seed=0, learner=False)
    venv = make_venv(cfg.env, seed=0, global_state=spec.global_state)
    rollout = Collector(venv, algo, seed=0, spec=spec).collect(cfg.training.chunk_steps)
    venv.close()
    replay = cfg.replay
    assert replay is not None
    hp = cfg.algorithm.hp
    return (buffer_kwargs(cfg, list(spaces[0]), spec), dict(rollout.data), rollout.env_steps,
            float(hp.learn_step), int(hp.batch_size),
            UpdateRule(replay.learning_starts, replay.learning_delay),
            max_owed(replay.max_policy_lag, cfg.training.weight_sync_updates))


class WriterShell:
    """Stores the chunk for a member when asked, as a rollout worker would (each member's
    chunks to the shards in turn, from its own)."""

    def __init__(self, chunk: dict[str, Any], env_steps: int, shards: list[BufferClient]
                 ) -> None:
        self.chunk, self.env_steps, self.shards = chunk, env_steps, shards
        self.clients: dict[int, BufferClient] = {}

    def collect(self, member: int) -> int:
        if member not in self.clients:
            first = ShardLayout(len(self.shards)).first_shard(member)
            self.clients[member] = sharded(self.shards, first)
        client = self.clients[member]
        chunk = TransitionChunk(self.chunk, member, self.env_steps)
        while not client.add(chunk).accepted:
            while not client.room(member, chunk_rows(chunk)):
                time.sleep(0.01)
        return self.env_steps


class ReaderShell:
    """A learner process's reads for ``members``: rounds of granted batches, read ahead."""

    def __init__(self, members: list[int], shards: list[BufferClient], batch_size: int,
                 learn_step: float, seed: int) -> None:
        self.members, self.buffer = members, sharded(shards)
        self.batch_size, self.learn_step = batch_size, learn_step
        self.rng = np.random.default_rng(seed)
        self.priorities: dict[int, PriorityUpdate | None] = {m: None for m in members}

    def _send(self) -> Later:
        """One round's read for every member (to every shard at once)."""
        requests = [SampleRequest(f"learner-{m}", self.batch_size, ROUND,
                                  ReadSpec.mixin(0.5, alpha=0.6, beta=0.4),
                                  self.priorities[m], Pace(m, self.learn_step))
                    for m in self.members]
        for m in self.members:
            self.priorities[m] = None
        return self.buffer.sample_joined_later(requests)

    def run(self, seconds: float) -> dict[str, float]:
        """Rounds for ``seconds``: rows sampled, rounds, and seconds waiting on the buffer."""
        rows = rounds = 0
        waited = 0.0
        pending = self._send()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            began = time.perf_counter()
            joined = pending.result()
            waited += time.perf_counter() - began
            for k, m in enumerate(self.members):
                n = len(joined.indices[k])
                rows += n
                if n:
                    self.priorities[m] = PriorityUpdate(joined.indices[k], self.rng.random(n))
            pending = self._send()
            rounds += 1
            if not any(len(i) for i in joined.indices):
                time.sleep(0.001)
        pending.result()
        return {"rows": rows, "rounds": rounds, "waited": waited}


Writer: Any = ray.remote(num_cpus=0)(WriterShell)
Reader: Any = ray.remote(num_cpus=0)(ReaderShell)


def point(members: int, shards: int, seconds: float, readers: int, writers: int
          ) -> dict[str, float]:
    """One point: env steps/s stored and rows/s sampled, and the readers' share waiting."""
    kwargs, chunk, env_steps, learn_step, batch_size, rule, owed = main_job_parts()
    layout = ShardLayout(shards)
    names = [f"plumbing-{uuid.uuid4().hex}" for _ in range(shards)]
    spread: dict[str, Any] = {"scheduling_strategy": "SPREAD"} if shards > 1 else {}
    buffers = [make_buffer_actor(layout.buffer_kwargs(kwargs, s),
                                 UpdateGrants(layout.rule(rule), layout.max_owed(owed)),
                                 name=name, num_cpus=0, **spread)
               for s, name in enumerate(names)]
    clients: list[BufferClient] = [RemoteBuffer(b, name) for b, name in zip(buffers, names)]
    ws = [Writer.remote(chunk, env_steps, clients) for _ in range(writers)]
    rs = [Reader.remote([m for m in range(members) if m % readers == r], clients, batch_size,
                        learn_step, r) for r in range(readers)]
    ray.get([b.stats.remote() for b in buffers] + [w.__ray_ready__.remote() for w in ws]
            + [r.__ray_ready__.remote() for r in rs])
    reading = [r.run.remote(seconds) for r in rs]
    inflight = {ws[m % writers].collect.remote(m): m for m in range(members)}
    stored = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
        for ref in ready:
            m = inflight.pop(ref)
            stored += ray.get(ref)
            inflight[ws[m % writers].collect.remote(m)] = m
    elapsed = time.perf_counter() - start
    read = ray.get(reading)
    ray.get(list(inflight))
    for actor in [*buffers, *ws, *rs]:
        ray.kill(actor)
    return {"env_steps_per_s": stored / elapsed,
            "sampled_rows_per_s": sum(r["rows"] for r in read) / seconds,
            "readers_waiting": sum(r["waited"] for r in read) / (seconds * readers)}


def start_ray(nodes: int) -> Any:
    """A local Ray of this machine's cores, or (``nodes`` > 1) a cluster of ``nodes`` nodes on
    this machine, the cores shared out; the cluster (None for one node)."""
    cpus = os.cpu_count() or 1
    if nodes == 1:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        return None
    from ray.cluster_utils import Cluster

    per = max(1, cpus // nodes)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": per})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=per)
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    return cluster


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--members", type=int, nargs="+", default=[4, 16, 64])
    p.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--readers", type=int, default=2, help="learner processes")
    p.add_argument("--writers", type=int, default=2, help="writer processes")
    p.add_argument("--nodes", type=int, default=1, help="Ray nodes started on this machine")
    p.add_argument("--main-job-rate", type=float, default=None,
                   help="the main job's env steps/s, for its sampled rows/s beside the points")
    p.add_argument("--main-job-steps", type=int, default=0,
                   help="measure the main job's env steps/s first, at this many env steps per "
                        "member (a local Ray of its own)")
    p.add_argument("--main-job-shards", type=int, nargs="+", default=[1],
                   help="the main job's buffer.shards, a run each (the first: the ratios' base)")
    args = p.parse_args(argv)
    if args.main_job_steps:
        for shards in args.main_job_shards:
            f = main_job(ROOT, args.main_job_steps, 1, 4, (f"buffer.shards={shards}",))
            print(f"main job, buffer.shards={shards}: {f['env_steps_per_s']:,.0f} env "
                  f"steps/s{learner_time(f)}", flush=True)
            args.main_job_rate = args.main_job_rate or f["env_steps_per_s"]
    cluster = start_ray(args.nodes)
    _, _, _, learn_step, batch_size, _, _ = main_job_parts()
    per_step = batch_size / learn_step  # rows sampled per env step, by the rule
    if args.main_job_rate:
        print(f"main job: {args.main_job_rate:,.0f} env steps/s -> "
              f"{args.main_job_rate * per_step:,.0f} sampled rows/s", flush=True)
    for members in args.members:
        for shards in args.shards:
            f = point(members, shards, args.seconds, args.readers, args.writers)
            ratio = (f"; {f['sampled_rows_per_s'] / (args.main_job_rate * per_step):.1f}x "
                     "the main job's" if args.main_job_rate else "")
            print(f"members {members:>3} shards {shards}: {f['env_steps_per_s']:,.0f} env "
                  f"steps/s, {f['sampled_rows_per_s']:,.0f} sampled rows/s "
                  f"(readers waiting {f['readers_waiting']:.0%}){ratio}", flush=True)
    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()


if __name__ == "__main__":
    main()
