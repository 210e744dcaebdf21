"""AgileRL 2.58 and RLlib 2.60 baselines, measured in the same run (and on the same machine) as
distmarl's own benchmarks.

    .venv-bench/bin/python -m benchmarks.baselines.agilerl_runner --quick

Needs the ``.venv-bench`` environment (python 3.11, torch CPU, agilerl 2.58, ray[rllib] 2.60,
mpe2); everything third-party is imported inside the functions so that importing this module
never fails. What is measured:

* :func:`run_agilerl_maddpg` - an AgileRL MADDPG/MATD3 population trained on mpe2
  ``simple_speaker_listener_v4`` by AgileRL's own ``train_multi_agent_off_policy``.
* :func:`run_agilerl_buffer_add` / :func:`run_rllib_buffer_add` - rows/s added to AgileRL's
  multi-agent replay storage and to RLlib's ``MultiAgentMixInReplayBuffer``, speaker-listener
  shapes (the ones :mod:`benchmarks.micro.buffer_bench` uses for distmarl's buffer).
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import math
import random
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

AGENTS = ("speaker_0", "listener_0")
OBS_DIM = {"speaker_0": 3, "listener_0": 11}
ACT_DIM = {"speaker_0": 3, "listener_0": 5}
MAX_CYCLES = 25
BUFFER_CAPACITY = 1_000_000

# AgileRL's MADDPG speaker-listener demo (demos/multi_agent/demo_multi_agent.py in AgileRL
# 2.58's repository): lr 1e-3 / 1e-3, gamma 0.95, tau 0.01, Ornstein-Uhlenbeck noise, memory
# 100k, tournament of 2 with elitism, its mutation probabilities. batch_size, learn_step, the
# population size, num_envs, evo_steps and the network come from the caller (distmarl's example
# config uses the same values as the defaults below).
DEMO_HP = {
    "O_U_NOISE": True,
    "EXPL_NOISE": 0.1,
    "MEAN_NOISE": 0.0,
    "THETA": 0.15,
    "DT": 0.01,
    "LR_ACTOR": 1e-3,
    "LR_CRITIC": 1e-3,
    "GAMMA": 0.95,
    "TAU": 0.01,
    "POLICY_FREQ": 2,  # MATD3 only
}
MEMORY_SIZE = 100_000
DEMO_MUTATION = {
    "no_mutation": 0.2,
    "architecture": 0.2,
    "new_layer_prob": 0.2,
    "parameters": 0.2,
    "activation": 0.0,
    "rl_hp": 0.2,
    "mutation_sd": 0.1,
}
# RL hyperparameter mutation ranges: the ones distmarl's examples/configs/speaker_listener_maddpg
# .yaml evolves (lr ranges and batch range as in AgileRL's speaker-listener tutorial; learn_step
# capped at 16 so an RL-HP mutation can't make a member cheaper than the distmarl run's).
HP_RANGES = {
    "lr_actor": {"min": 1e-4, "max": 1e-2},
    "lr_critic": {"min": 1e-4, "max": 1e-2},
    "batch_size": {"min": 8, "max": 512, "dtype": int},
    "learn_step": {"min": 1, "max": 16, "dtype": int, "grow_factor": 1.5, "shrink_factor": 0.75},
}


def agilerl_available() -> bool:
    """True when AgileRL and mpe2 can be imported (i.e. running under ``.venv-bench``)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("agilerl", "mpe2", "torch"))
    except (ImportError, ValueError):
        return False


def _rllib_available() -> bool:
    try:
        return importlib.util.find_spec("ray.rllib") is not None
    except (ImportError, ValueError):
        return False


def make_speaker_listener(max_cycles: int = MAX_CYCLES) -> Any:
    """mpe2 speaker-listener, continuous actions (module-level so subprocess workers can pickle it)."""
    from mpe2 import simple_speaker_listener_v4

    return simple_speaker_listener_v4.parallel_env(max_cycles=max_cycles, continuous_actions=True)


def _net_config(hidden: Sequence[int]) -> dict[str, Any]:
    """``hidden=(a, ..., z)`` as AgileRL's encoder + head layout: encoder MLP ``[a, ...]``, latent
    ``z``, head MLP ``[z]``. ``(64, 64)`` gives AgileRL's yaml (and distmarl's example) config:
    encoder [64], latent_dim 64, head [64]."""
    hidden = [int(h) for h in hidden]
    if not hidden:
        raise ValueError("hidden must name at least one layer size")
    encoder = hidden[:-1] or hidden[:1]
    return {
        "latent_dim": hidden[-1],
        "encoder_config": {"hidden_size": encoder},
        "head_config": {"hidden_size": [hidden[-1]]},
    }


@contextmanager
def counted_learn(algo_cls: type) -> Iterator[list[int]]:
    """While open, ``algo_cls.learn`` counts its calls in the yielded one-element list; the
    class is restored afterwards (AgileRL's computation is unchanged)."""
    own = "learn" in algo_cls.__dict__
    orig = algo_cls.learn  # type: ignore[attr-defined]
    calls = [0]

    def counting_learn(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return orig(self, *args, **kwargs)

    algo_cls.learn = counting_learn  # type: ignore[attr-defined]
    try:
        yield calls
    finally:
        if own:
            algo_cls.learn = orig  # type: ignore[attr-defined]
        else:
            del algo_cls.learn  # type: ignore[attr-defined]


class _TargetReachedError(Exception):
    """Raised by the recorder to leave AgileRL's loop once the target fitness is reached."""


def _check_run_args(
    algo: str, total_pop_steps: int, population: int, num_envs: int, evo_steps: int
) -> None:
    """Refuse arguments ``run_agilerl_maddpg`` cannot run, naming the value."""
    if algo not in ("MADDPG", "MATD3"):
        raise ValueError(f"algo must be MADDPG or MATD3, got {algo!r}")
    if total_pop_steps <= 0 or population <= 0 or num_envs <= 0:
        raise ValueError("total_pop_steps, population and num_envs must be positive")
    if evo_steps < num_envs:
        raise ValueError(f"evo_steps ({evo_steps}) must be at least num_envs ({num_envs})")


def _evo_plan(
    total_pop_steps: int, population: int, num_envs: int, evo_steps: int
) -> tuple[int, int]:
    """``(per_member, evo)``: AgileRL's per-member ``max_steps`` and its ``evo_steps``.

    The per-member budget is split into equal evolution steps of at most ``evo_steps``
    (multiples of ``num_envs``, as AgileRL's loop runs ``evo_steps // num_envs`` vector steps),
    so that the run stops at (or just above) ``total_pop_steps`` instead of finishing a whole
    extra evolution step.
    """
    per_member = math.ceil(math.ceil(total_pop_steps / population) / num_envs) * num_envs
    n_evo = math.ceil(per_member / evo_steps)
    evo = math.ceil(per_member / n_evo / num_envs) * num_envs
    return per_member, evo


def run_agilerl_maddpg(
    total_pop_steps: int,
    *,
    population: int = 4,
    num_envs: int = 8,
    learn_step: int = 16,
    batch_size: int = 64,
    algo: str = "MADDPG",
    evo_steps: int = 10_000,
    target: float | None = None,
    seed: int = 0,
    hidden: Sequence[int] = (64, 64),
    stop_at_target: bool = True,
    torch_threads: int | None = 1,
) -> dict[str, Any]:
    """Train an AgileRL population on mpe2 speaker-listener and time it.

    Code path: AgileRL's own ``agilerl.training.train_multi_agent_off_policy.
    train_multi_agent_off_policy`` (not a copy), fed with AgileRL components built as its
    MADDPG speaker-listener demo builds them: ``create_population`` (MADDPG or MATD3),
    ``AsyncPettingZooVecEnv`` over ``num_envs`` subprocess envs, its ``ReplayBuffer`` (2.58's
    multi-agent storage; there is no ``MultiAgentReplayBuffer`` class any more),
    ``TournamentSelection(2, elitism)`` and ``Mutations`` (the demo's probabilities). No wandb, no
    tensorboard, no checkpoints, no elite saving, console table off (``verbose=False``).

    Two things are hooked, both restored afterwards: the module's ``init_loggers`` gets one extra
    AgileRL ``Logger`` that records the best fitness at each evolution step, and the algorithm
    class's ``learn`` is wrapped to count updates. Neither changes what AgileRL computes.

    ``total_pop_steps`` is population env steps (all members together); AgileRL's ``max_steps``
    is per member, so it is given ``ceil(total_pop_steps / population)`` rounded up to a multiple
    of ``num_envs``. ``evo_steps`` is AgileRL's (per member per evolution step) and an upper
    bound here: the per-member budget is split into equal evolution steps no longer than it
    (multiples of ``num_envs``), so a run does not overshoot by most of an evolution step; 40,000
    population steps with the defaults is exactly one 10,000-step evolution step per member. Fitness is AgileRL's: each
    evolution step every member plays one evaluation episode in each of the ``num_envs`` envs
    (summed agent rewards, mean over envs); those evaluation steps are not counted in
    ``env_steps``. Wall time starts when ``train_multi_agent_off_policy`` is called (env and
    population construction is ``setup_seconds``) and so includes AgileRL's pre-training
    mutation, evaluations, selection and mutation. ``target``: ``time_to_target_s`` is the wall
    time of the first evolution step whose best member fitness is >= target; with
    ``stop_at_target`` training stops there.

    ``torch_threads`` (default 1) is set with ``torch.set_num_threads`` in this process - the
    one AgileRL trains the whole population in (its env workers don't use torch). 1 is what
    distmarl's learner and rollout actors use, and is not a handicap for 64-wide MLPs at batch
    64. Torch's own default (2 on the 2-core machine) made AgileRL ~20x slower whenever other
    processes were busy (OpenMP threads spinning for a core: 20 vs 460 env steps/s at 5,000
    steps, same load); pass ``None`` to keep torch's default anyway.
    """
    if not agilerl_available():
        raise RuntimeError("agilerl / mpe2 not importable: run under .venv-bench")
    import torch
    from agilerl.algorithms.core.registry import HyperparameterConfig, RLParameter
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.hpo.mutation import Mutations
    from agilerl.hpo.tournament import TournamentSelection
    from agilerl.logger import Logger
    from agilerl.training import train_multi_agent_off_policy as train_mod
    from agilerl.utils.utils import create_population
    from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv

    _check_run_args(algo, total_pop_steps, population, num_envs, evo_steps)
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    per_member, evo = _evo_plan(total_pop_steps, population, num_envs, evo_steps)
    steps_per_evo = population * evo  # population env steps per AgileRL evolution step

    setup_start = time.perf_counter()
    env = AsyncPettingZooVecEnv(
        [functools.partial(make_speaker_listener, MAX_CYCLES) for _ in range(num_envs)]
    )
    try:
        env.reset(seed=seed)
        agent_ids = list(env.agents)
        observation_spaces = [env.single_observation_space(a) for a in agent_ids]
        action_spaces = [env.single_action_space(a) for a in agent_ids]
        init_hp = {
            **DEMO_HP,
            "ALGO": algo,
            "POP_SIZE": population,
            "BATCH_SIZE": batch_size,
            "LEARN_STEP": learn_step,
            "MEMORY_SIZE": MEMORY_SIZE,
            "AGENT_IDS": agent_ids,
            "N_AGENTS": len(agent_ids),
        }
        hp_config = HyperparameterConfig(
            **{name: RLParameter(**spec) for name, spec in HP_RANGES.items()}
        )
        with warnings.catch_warnings():
            # create_population is deprecated in 2.58 in favour of MADDPG.population(); same agents.
            warnings.simplefilter("ignore", DeprecationWarning)
            pop = create_population(
                algo,
                _net_config(hidden),
                init_hp,
                observation_space=observation_spaces,
                action_space=action_spaces,
                hp_config=hp_config,
                population_size=population,
                num_envs=num_envs,
                device="cpu",
            )
        memory = ReplayBuffer(max_size=MEMORY_SIZE, device="cpu")
        tournament = TournamentSelection(
            tournament_size=2, elitism=True, population_size=population
        )
        mutations = Mutations(**DEMO_MUTATION, rand_seed=seed, device="cpu")
        setup_seconds = time.perf_counter() - setup_start

        history: list[tuple[int, float, float]] = []
        state: dict[str, Any] = {"t0": 0.0, "evo": 0, "ttt": None, "fps": []}

        class _Recorder(Logger):
            def write(self, report: Any) -> None:
                wall = time.perf_counter() - state["t0"]
                state["evo"] += 1
                fits = [float(f) for f in report.metrics.fitnesses if not isinstance(f, dict)]
                best = max(fits) if fits else float("nan")
                history.append((state["evo"] * steps_per_evo, wall, best))
                state["fps"].append(report.metrics.mean_fps)
                if target is not None and state["ttt"] is None and best >= target:
                    state["ttt"] = wall
                    if stop_at_target:
                        raise _TargetReachedError

            def close(self) -> None:
                pass

        recorder = _Recorder()
        orig_init_loggers = train_mod.init_loggers

        def init_loggers_with_recorder(**kwargs: Any) -> list[Any]:
            return [*orig_init_loggers(**kwargs), recorder]

        stopped_at_target = False
        train_mod.init_loggers = init_loggers_with_recorder
        try:
            with counted_learn(type(pop[0])) as updates:
                state["t0"] = time.perf_counter()
                try:
                    train_mod.train_multi_agent_off_policy(
                        env,
                        "simple_speaker_listener_v4",
                        algo,
                        pop,
                        memory=memory,
                        sum_scores=True,
                        init_hp=init_hp,
                        max_steps=per_member,
                        evo_steps=evo,
                        eval_steps=None,
                        eval_loop=1,
                        learning_delay=0,
                        target=target,
                        selection_strategy=tournament,
                        mutation=mutations,
                        checkpoint=None,
                        save_elite=False,
                        wb=False,
                        tensorboard=False,
                        verbose=False,
                    )
                except _TargetReachedError:
                    stopped_at_target = True
                wall = time.perf_counter() - state["t0"]
        finally:
            train_mod.init_loggers = orig_init_loggers
    finally:
        with suppress(Exception):
            env.close()

    env_steps = state["evo"] * steps_per_evo
    fps = [f for f in state["fps"] if np.isfinite(f)]
    notes = (
        f"agilerl.training.train_multi_agent_off_policy (AgileRL's own loop), {algo} x{population}, "
        f"AsyncPettingZooVecEnv {num_envs} subprocess envs (mpe2 simple_speaker_listener_v4, "
        f"continuous, max_cycles={MAX_CYCLES}); batch {batch_size}, learn_step {learn_step}, "
        f"lr_actor/lr_critic 1e-3, gamma 0.95, tau 0.01, O-U noise (0.1, theta 0.15, dt 0.01), "
        f"ReplayBuffer {MEMORY_SIZE}, net {_net_config(hidden)}, evo_steps {evo}/member "
        f"({state['evo']} evo steps), max_steps {per_member}/member, tournament 2 + elitism, "
        f"demo mutations {DEMO_MUTATION}; torch threads {torch.get_num_threads()}; "
        f"setup {setup_seconds:.1f}s not in wall_seconds; wall includes per-evo eval episodes "
        f"(~{population * num_envs * MAX_CYCLES} env steps each evo step, not counted) and "
        f"selection/mutation; AgileRL's own mean train steps/s per member "
        f"{np.mean(fps) if fps else float('nan'):.0f}"
        + ("; stopped at target" if stopped_at_target else "")
    )
    return {
        "env_steps": env_steps,
        "wall_seconds": wall,
        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
        "updates": updates[0],
        "best_fitness_history": history,
        "time_to_target_s": state["ttt"],
        "setup_seconds": setup_seconds,
        "notes": notes,
    }


# ---------------------------------------------------------------------------------------------
# Replay buffer add throughput


def _speaker_listener_step(rows: int, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """One vectorised step of ``rows`` sub-envs as the vec env returns it: field -> agent -> array
    (float32 obs/actions/rewards, bool dones; reward and done one scalar per agent and row)."""
    rng = np.random.default_rng(seed)
    return {
        "obs": {a: rng.random((rows, OBS_DIM[a]), dtype=np.float32) for a in AGENTS},
        "action": {a: rng.random((rows, ACT_DIM[a]), dtype=np.float32) for a in AGENTS},
        "reward": {a: rng.random(rows, dtype=np.float32) for a in AGENTS},
        "next_obs": {a: rng.random((rows, OBS_DIM[a]), dtype=np.float32) for a in AGENTS},
        "done": {a: rng.random(rows) < 0.04 for a in AGENTS},
    }


def _rows_per_s(fn: Callable[[], Any], rows: int, seconds: float, warmup: int = 3) -> float:
    """Rows/s of ``fn`` (adding ``rows`` rows per call), timed as buffer_bench.py times
    distmarl's buffer (:func:`benchmarks.micro.timing.best_rate`) after ``warmup`` calls."""
    from benchmarks.micro.timing import best_rate

    for _ in range(warmup):
        fn()
    gc.collect()  # garbage left by an earlier measurement (RLlib's per-row objects) isn't ours
    return best_rate(fn, seconds, warmup=0) * rows


def run_agilerl_buffer_add(
    rows_per_call: int, seconds: float, *, include_packaging: bool = True
) -> float:
    """Rows/s added to AgileRL 2.58's multi-agent replay storage (capacity 1M).

    2.58 has no ``MultiAgentReplayBuffer``/``save_to_memory`` any more: its multi-agent loop
    stores a ``MultiAgentTransition`` (obs, action, reward, next_obs, done; agent -> array with a
    leading num_envs axis) as a TensorDict with ``batch_size=[num_envs]`` in ``ReplayBuffer``.
    Each call does exactly what ``train_multi_agent_off_policy`` does per env step:
    ``transition_to_tensordict(MultiAgentTransition(...))``, set ``batch_size``, ``memory.add``.
    With ``include_packaging=False`` only ``memory.add`` of a prebuilt TensorDict is timed.
    The numpy arrays are made once, before timing; the first adds (which allocate the 1M-row
    storage) are warm-up.
    """
    import torch
    from agilerl.components.data import MultiAgentTransition, transition_to_tensordict
    from agilerl.components.replay_buffer import ReplayBuffer

    step = _speaker_listener_step(rows_per_call)
    memory = ReplayBuffer(max_size=BUFFER_CAPACITY, device="cpu")
    size = torch.Size([rows_per_call])

    def package() -> Any:
        td = transition_to_tensordict(MultiAgentTransition(**step))
        td.batch_size = size
        return td

    if include_packaging:
        def add() -> None:
            memory.add(package())
    else:
        prebuilt = package()

        def add() -> None:
            memory.add(prebuilt)

    return _rows_per_s(add, rows_per_call, seconds)


def run_rllib_buffer_add(
    rows_per_call: int, seconds: float, *, include_packaging: bool = True
) -> float:
    """Rows/s added to RLlib 2.60's ``MultiAgentMixInReplayBuffer`` (capacity 1M,
    replay_ratio 0.5, its other defaults: storage_unit "timesteps", prioritized underlying
    buffers with alpha 0.6).

    Each call wraps the same numpy arrays as :func:`run_agilerl_buffer_add` in one
    ``SampleBatch`` per agent/policy (RLlib's columns obs, actions, rewards, new_obs,
    terminateds) inside a ``MultiAgentBatch(env_steps=rows_per_call)`` and calls ``add``; with
    ``include_packaging=False`` the ``MultiAgentBatch`` is prebuilt and only ``add`` is timed.
    ``add`` copies the batch and slices it into one-timestep batches, as RLlib always does. No
    ``sample`` calls are made, so its list of not-yet-sampled batches only grows (as it would
    between two learner steps).
    """
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
    from ray.rllib.utils.replay_buffers import MultiAgentMixInReplayBuffer

    step = _speaker_listener_step(rows_per_call)
    columns = {
        SampleBatch.OBS: "obs",
        SampleBatch.ACTIONS: "action",
        SampleBatch.REWARDS: "reward",
        SampleBatch.NEXT_OBS: "next_obs",
        SampleBatch.TERMINATEDS: "done",
    }
    buffer = MultiAgentMixInReplayBuffer(capacity=BUFFER_CAPACITY, replay_ratio=0.5)

    def package() -> MultiAgentBatch:
        return MultiAgentBatch(
            {a: SampleBatch({col: step[f][a] for col, f in columns.items()}) for a in AGENTS},
            env_steps=rows_per_call,
        )

    if include_packaging:
        def add() -> None:
            buffer.add(package())
    else:
        prebuilt = package()

        def add() -> None:
            buffer.add(prebuilt)

    return _rows_per_s(add, rows_per_call, seconds)


# ---------------------------------------------------------------------------------------------


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 4)
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke of every baseline")
    parser.add_argument("--steps", type=int, default=None,
                        help="population env steps for MADDPG (default 5,000 quick / 40,000)")
    parser.add_argument("--buffer-seconds", type=float, default=None,
                        help="seconds per buffer measurement (default 0.5 quick / 2)")
    parser.add_argument("--skip-maddpg", action="store_true")
    parser.add_argument("--skip-buffers", action="store_true")
    args = parser.parse_args(argv)
    steps = args.steps or (5_000 if args.quick else 40_000)
    seconds = args.buffer_seconds or (0.5 if args.quick else 2.0)

    if not args.skip_buffers:
        out: dict[str, float] = {}
        for rows in (8, 1000):
            for packaging in (True, False):
                tag = f"{rows}-row batches" + ("" if packaging else ", add() only")
                if agilerl_available():
                    out[f"agilerl add rows/s ({tag})"] = run_agilerl_buffer_add(
                        rows, seconds, include_packaging=packaging)
                if _rllib_available():
                    out[f"rllib add rows/s ({tag})"] = run_rllib_buffer_add(
                        rows, seconds, include_packaging=packaging)
        print(json.dumps(_jsonable(out), indent=1), flush=True)

    if not args.skip_maddpg:
        if not agilerl_available():
            print("AgileRL not available; run under .venv-bench")
            return
        # The quick smoke uses 1,000-step evolution steps so it shows more than one fitness
        # point, and a target every member reaches so the time-to-target path runs.
        kwargs: dict[str, Any] = (
            {"evo_steps": 1_000, "target": -1e6, "stop_at_target": False} if args.quick else {}
        )
        result = run_agilerl_maddpg(steps, **kwargs)
        print(json.dumps(_jsonable(result), indent=1), flush=True)


if __name__ == "__main__":
    main()
