"""AgileRL 2.58's IPPO with its CNN on pistonball, the baseline of :mod:`benchmarks.system.pixels`.

    .venv-bench/bin/python -m benchmarks.baselines.agilerl_ippo --steps 2048 [--json out.json]

Needs the ``bench`` extra (agilerl 2.58, pymunk, pygame; SuperSuit is a dependency); everything
third-party is imported inside the functions so that importing this module never fails. The
env is pistonball (20 pistons, discrete moves as in the example, or continuous) through the
same SuperSuit wrappers as ``examples/configs/pistonball_ippo.yaml``: grey
(``color_reduction`` B), 64x64 (``resize``), 4 frames stacked (``frame_stack``), ``uint8``,
then moved to channels-first (an ``observation_lambda``: AgileRL 2.58's IPPO fails on
channels-last frames when agents share a policy) and, for continuous moves, actions given
their ``(1,)`` shape back (``action_lambda``: it hands pistonball scalars). AgileRL scales the
frames itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import numpy as np

MIB = 1024 * 1024


def make_pistonball(n_pistons: int = 20, max_cycles: int = 125, side: int = 64,
                    stack: int = 4, continuous: bool = False) -> Any:
    """Pistonball with the example config's SuperSuit preprocessing (a parallel env)."""
    import supersuit as ss
    from pettingzoo.butterfly import pistonball_v6

    env = pistonball_v6.parallel_env(n_pistons=n_pistons, max_cycles=max_cycles,
                                     continuous=continuous)
    env = ss.color_reduction_v0(env, mode="B")
    env = ss.resize_v1(env, x_size=side, y_size=side)
    env = ss.frame_stack_v1(env, stack)
    # AgileRL's IPPO fails on channels-last frames when agents share a policy (its value pass
    # over the grouped next frames does not transpose them): hand it channels-first frames.
    env = ss.observation_lambda_v0(
        env, lambda obs, space: np.ascontiguousarray(np.moveaxis(obs, -1, 0)),
        lambda space: _channels_first(space))
    if not continuous:
        return env
    # AgileRL's IPPO hands a one-dimensional Box action to each sub-env as a scalar, which
    # pistonball refuses ("action should have shape (1,)"): give it its shape back.
    return ss.action_lambda_v1(
        env, lambda action, space: np.asarray(action, np.float32).reshape(space.shape),
        lambda space: space)


def _channels_first(space: Any) -> Any:
    from gymnasium.spaces import Box

    return Box(np.moveaxis(space.low, -1, 0), np.moveaxis(space.high, -1, 0), dtype=space.dtype)


def _status_mib(pid: int, keys: tuple[str, ...]) -> float | None:
    """The sum of ``keys`` (kB fields of Linux's ``/proc/PID/status``) in MiB; None when the
    process is gone or a field is missing."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kb = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f)
                  if k in keys}
    except (OSError, ValueError):
        return None
    return sum(kb.values()) * 1024 / MIB if len(kb) == len(keys) else None


def peak_rss_mib(pid: int) -> float | None:
    """The peak resident memory (``VmHWM``) of process ``pid`` in MiB, or None."""
    return _status_mib(pid, ("VmHWM",))


def private_rss_mib(pid: int) -> float | None:
    """Resident memory of ``pid`` without shared pages (``RssAnon + RssFile``) in MiB, or None."""
    return _status_mib(pid, ("RssAnon", "RssFile"))


def run_agilerl_ippo(
    total_pop_steps: int,
    *,
    population: int = 2,
    num_envs: int = 4,
    learn_step: int = 64,
    batch_size: int = 1024,
    lr: float = 3e-4,
    ent_coef: float = 0.0,
    update_epochs: int = 2,
    gamma: float = 0.99,
    continuous: bool = False,
    evo_steps: int = 5000,
    seed: int = 0,
    torch_threads: int | None = None,
) -> dict[str, Any]:
    """Train an AgileRL IPPO population on preprocessed pistonball and time it.

    Code path: AgileRL's own ``train_multi_agent_on_policy`` over ``AsyncPettingZooVecEnv``
    (``num_envs`` subprocess envs), a population from ``create_population("IPPO", ...)`` with
    the example config's network (CNN channels 16, 32, kernels 8, 4, strides 4, 2; latent 128;
    head 64), ``TournamentSelection(2, elitism)`` and ``Mutations`` that change only the
    learning rate, half the time (as the example config). The 20 pistons share one policy
    (AgileRL groups ``piston_*``).

    ``learn_step`` is in vectorised steps, as distmarl's: AgileRL's (in env steps) is given
    ``learn_step * num_envs``, so both learn once per the same number of transitions, with the
    same minibatch and epochs (the same update-to-data ratio). ``total_pop_steps`` is
    population env steps; AgileRL's per-member ``max_steps`` is ``total_pop_steps /
    population``. ``env_steps`` counts the fragments learned (hooked ``learn``) times the
    fragment length; evaluation episodes are not counted but their time is in the wall time,
    as in distmarl's figure. ``torch_threads`` None keeps torch's default (one thread per core):
    AgileRL trains the whole population in this one process.
    """
    import torch
    from agilerl.algorithms.core.registry import HyperparameterConfig, RLParameter
    from agilerl.hpo.mutation import Mutations
    from agilerl.hpo.tournament import TournamentSelection
    from agilerl.training.train_multi_agent_on_policy import train_multi_agent_on_policy
    from agilerl.utils.utils import create_population
    from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv

    from benchmarks.baselines.agilerl_runner import counted_learn

    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    fragment = learn_step * num_envs
    per_member = max(fragment, total_pop_steps // population)

    setup_start = time.perf_counter()
    env = AsyncPettingZooVecEnv([functools.partial(make_pistonball, continuous=continuous)
                                  for _ in range(num_envs)])
    try:
        env.reset(seed=seed)
        agent_ids = list(env.agents)
        init_hp = {"POP_SIZE": population, "BATCH_SIZE": batch_size, "LR": lr,
                   "LEARN_STEP": fragment, "GAMMA": gamma, "GAE_LAMBDA": 0.95,
                   "CLIP_COEF": 0.2, "ENT_COEF": ent_coef, "VF_COEF": 0.5,
                   "MAX_GRAD_NORM": 0.5, "UPDATE_EPOCHS": update_epochs,
                   "AGENT_IDS": agent_ids}
        net_config = {"latent_dim": 128,
                      "encoder_config": {"channel_size": [16, 32], "kernel_size": [8, 4],
                                         "stride_size": [4, 2]},
                      "head_config": {"hidden_size": [64]}}
        pop = create_population(
            "IPPO", net_config, init_hp,
            observation_space=[env.single_observation_space(a) for a in agent_ids],
            action_space=[env.single_action_space(a) for a in agent_ids],
            hp_config=HyperparameterConfig(lr=RLParameter(min=1e-4, max=1e-3)),
            population_size=population, num_envs=num_envs, device="cpu")
        tournament = TournamentSelection(tournament_size=2, elitism=True,
                                         population_size=population)
        mutations = Mutations(no_mutation=0.5, architecture=0.0, new_layer_prob=0.0,
                              parameters=0.0, activation=0.0, rl_hp=0.5, rand_seed=seed,
                              device="cpu")
        setup_seconds = time.perf_counter() - setup_start

        env_peaks: dict[int, float] = {}
        stop = threading.Event()

        def sample_env_peaks() -> None:  # the sub-env processes are gone once training ends
            while not stop.wait(2.0):
                for proc in env.processes:
                    peak = peak_rss_mib(proc.pid)
                    if peak is not None:
                        env_peaks[proc.pid] = max(peak, env_peaks.get(proc.pid, 0.0))

        sampler = threading.Thread(target=sample_env_peaks, daemon=True)
        sampler.start()
        try:
            with counted_learn(type(pop[0])) as fragments:
                start = time.perf_counter()
                train_multi_agent_on_policy(
                    env, "pistonball_v6", "IPPO", pop, sum_scores=True, init_hp=init_hp,
                    max_steps=per_member, evo_steps=evo_steps, eval_steps=None, eval_loop=1,
                    selection_strategy=tournament, mutation=mutations, checkpoint=None,
                    save_elite=False, wb=False, tensorboard=False, verbose=False)
                wall = time.perf_counter() - start
        finally:
            stop.set()
            sampler.join()
    finally:
        with suppress(Exception):
            env.close()

    env_steps = fragments[0] * fragment
    main_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MIB
    return {
        "env_steps": env_steps,
        "wall_seconds": wall,
        "env_steps_per_s": env_steps / wall,
        "updates": fragments[0],
        "setup_seconds": setup_seconds,
        "peak_rss_mib": {"trainer": main_peak,
                         **{f"env#{i}": v for i, v in enumerate(env_peaks.values())}},
        "torch_threads": torch.get_num_threads(),
        "pid": os.getpid(),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="population env steps")
    parser.add_argument("--population", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--learn-step", type=int, default=64, help="vectorised steps per fragment")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--ent-coef", type=float, default=0.0)
    parser.add_argument("--update-epochs", type=int, default=2)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--continuous", action="store_true", help="continuous piston moves")
    parser.add_argument("--evo-steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the result here")
    args = parser.parse_args(argv)
    result = run_agilerl_ippo(
        args.steps, population=args.population, num_envs=args.num_envs,
        learn_step=args.learn_step, batch_size=args.batch_size, lr=args.lr,
        ent_coef=args.ent_coef, update_epochs=args.update_epochs, gamma=args.gamma,
        continuous=args.continuous, evo_steps=args.evo_steps,
        seed=args.seed, torch_threads=args.torch_threads)
    text = json.dumps(result, indent=1)
    print(text, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
