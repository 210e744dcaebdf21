"""The reference off-policy trainer (MADDPG, MATD3): one member in one process, top to bottom.

It uses the parts a population run uses (vectorised env, :class:`Collector`, replay buffer,
algorithm) without Ray, and counts updates as a run's buffer grants them
(:class:`~distmarl.buffers.grants.UpdateGrants`): one update per ``learn_step`` new
transitions past ``replay.learning_delay`` env steps, once ``learning_starts`` rows are
stored. It is the reference a run is checked against, and the
loop to read first to see what one member does.
"""

from __future__ import annotations

import time
from typing import cast

import torch

from distmarl.algorithms import ReplayLearner
from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.grants import UpdateGrants
from distmarl.buffers.tensors import to_torch
from distmarl.collect import Collector
from distmarl.config import ExperimentConfig, ReplayConfig
from distmarl.config.hparams import on_policy
from distmarl.config.replay import UpdateRule
from distmarl.factory import buffer_kwargs, env_spaces, make_algorithm, make_venv, rollout_spec
from distmarl.reference.result import Progress, ReferenceResult
from distmarl.types import Pace, SampleBatch


def train_off_policy(cfg: ExperimentConfig, steps: int, seed: int | None = None,
                     eval_every: int = 0, log: bool = True) -> ReferenceResult:
    """Train one off-policy member of ``cfg`` for ``steps`` env steps (per agent: vectorised
    steps * ``env.num_envs``; the loop stops at the first vectorised step reaching it).

    ``seed`` (default ``cfg.seed``) seeds the algorithm, the env and the buffer; the evaluation
    env takes ``seed + 1``. With ``eval_every`` > 0 the member is scored without exploration
    every ``eval_every`` env steps (:func:`progress_score`) and, with ``log``, a progress line
    is printed. Torch runs on one thread, as in a learner actor."""
    if on_policy(cfg.algorithm.name):
        raise ValueError(f"algorithm.name: {cfg.algorithm.name} is on-policy; train it with "
                         "distmarl.reference.train_on_policy")
    seed = cfg.seed if seed is None else seed
    torch.set_num_threads(1)
    spaces = env_spaces(cfg.env)
    algo = cast(ReplayLearner, make_algorithm(cfg.algorithm, spaces, seed=seed))
    replay = cast(ReplayConfig, cfg.replay)  # a replaying algorithm's config has the section
    venv = make_venv(cfg.env, seed=seed)
    eval_venv = make_venv(cfg.env, mode="sync", seed=seed + 1)
    spec = rollout_spec(cfg, spaces)
    buffer = MultiAgentReplayBuffer(**{**buffer_kwargs(cfg, list(spaces[0]), spec),
                                       "seed": seed})
    collector = Collector(venv, algo, seed=seed, spec=spec)
    grants = UpdateGrants(UpdateRule(replay.learning_starts, replay.learning_delay))
    done = 0
    progress = Progress(eval_every)
    while done < steps:
        rollout = collector.collect(1)  # one vectorised step: num_envs transitions
        buffer.add(rollout.data)
        done += rollout.env_steps
        progress.collected(done, rollout.episode_scores)
        grants.inserted(0, rollout.env_steps, buffer.counter)
        t = time.perf_counter()
        for _ in range(grants.owed(Pace(0, algo.hp["learn_step"]))):  # what they earned
            batch = buffer.read(int(algo.hp["batch_size"]))
            if batch is None:  # rate-limited (replay.samples_per_insert): owed until more data
                break
            grants.grant(0, 1)
            progress.metrics = learn(algo, buffer, batch)
            progress.updates += 1
        progress.learn_seconds += time.perf_counter() - t
        score = progress.evaluate_if_due(done, eval_venv, algo, seed)
        if score is not None and log:
            print(f"{done:>8} env steps  {progress.rate(done):7.0f}/s  "
                  f"updates {progress.updates:>6}  eval score {score:7.1f}", flush=True)
    result = progress.result(done, algo)
    venv.close()
    eval_venv.close()
    return result


def learn(algo: ReplayLearner, buffer: MultiAgentReplayBuffer, batch: SampleBatch
          ) -> dict[str, float]:
    """One update from ``batch``; with prioritised replay (the batch carries importance
    weights) its rows' priorities go back to ``buffer`` at once, as a learner actor sends
    them with its next sample call."""
    data = to_torch(dict(zip(buffer.field_names, batch.data, strict=True)))
    if batch.weights is None:
        return algo.learn(data)
    [metrics], errors = algo.learn_batches([data], [torch.as_tensor(batch.weights)])
    if errors is not None:
        buffer.update_priorities("default", batch.indices, errors)
    return metrics
