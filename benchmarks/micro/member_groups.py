"""Members updated as one stacked computation against each member's own updates.

``N`` members of an example config's algorithm, networks and spaces:

* MADDPG, the main job (``examples/configs/speaker_listener_maddpg.yaml``): each member with its
  own batches, ``--updates`` updates per call (a learner's train call); ``own`` is each member's
  ``learn_batches`` (its stack of one) one member after another (what N one-member learners
  sharing a device do), ``stacked`` is :class:`distmarl.algorithms.groups.OffPolicyStack` over
  the N members;
* MAPPO (``examples/configs/spread_mappo.yaml``, ``--on-policy``): each member learns one whole
  fragment (``learn_step`` steps of every sub-env, acted by its policy on random
  observations); ``own`` is each member's ``learn``, ``stacked`` is
  :class:`distmarl.algorithms.groups.OnPolicyStack`; rates count fragments (updates).

Prints updates/s over all members for each and their ratio, per population size and batch
size, on the device given (``cuda`` where torch sees a GPU, else ``cpu``), with ``--threads``
torch threads on CPU.

    .venv/bin/python -m benchmarks.micro.member_groups [--sizes 4 16] [--batches 256 1024]
        [--updates 32] [--calls 3] [--device cpu] [--threads 1] [--json groups.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from benchmarks import CONFIGS

CONFIG = CONFIGS / "speaker_listener_maddpg.yaml"
ON_POLICY_CONFIG = CONFIGS / "spread_mappo.yaml"


def random_batch(obs: dict[str, spaces.Space], act: dict[str, spaces.Space], size: int,
                 gen: torch.Generator) -> dict[str, dict[str, torch.Tensor]]:
    """A replay batch of ``size`` rows in the off-policy fields, every agent active."""
    out: dict[str, dict[str, torch.Tensor]] = {f: {} for f in (
        "obs", "action", "reward", "next_obs", "terminated", "truncated", "active")}
    for a, space in obs.items():
        out["obs"][a] = torch.randn(size, *space.shape, generator=gen)
        out["next_obs"][a] = torch.randn(size, *space.shape, generator=gen)
        out["reward"][a] = torch.randn(size, 1, generator=gen)
        out["terminated"][a] = torch.zeros(size, 1)
        out["truncated"][a] = torch.zeros(size, 1)
        out["active"][a] = torch.ones(size, 1)
        low, high = (torch.as_tensor(x) for x in (act[a].low, act[a].high))
        out["action"][a] = low + (high - low) * torch.rand(size, *act[a].shape, generator=gen)
    return out


def members_and_batches(ks: Sequence[int], batch: int, updates: int, device: str
                        ) -> tuple[list[Any], list[list[dict[str, dict[str, torch.Tensor]]]]]:
    """Members ``ks`` of the main job's MADDPG (seeded by their index) and ``updates`` batches
    of ``batch`` rows each (drawn from a generator seeded by the index), on ``device``."""
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(CONFIG, [f"algorithm.hp.batch_size={batch}"])
    env = env_spaces(cfg.env)
    members, data = [], []
    for k in ks:
        gen = torch.Generator().manual_seed(k)
        members.append(make_algorithm(cfg.algorithm, env, device=device, seed=k))
        data.append([{f: {a: t.to(device) for a, t in cols.items()}
                      for f, cols in random_batch(env[0], env[1], batch, gen).items()}
                     for _ in range(updates)])
    return members, data


def rate(n: int, batch: int, updates: int, calls: int, device: str) -> dict[str, Any]:
    """Updates/s over ``n`` members for their own updates and for the stacked ones."""
    from distmarl.algorithms.groups import OffPolicyStack
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(CONFIG, [f"algorithm.hp.batch_size={batch}"])
    obs, act = env_spaces(cfg.env)[:2]
    gen = torch.Generator().manual_seed(0)
    data = [[{f: {a: t.to(device) for a, t in cols.items()}
              for f, cols in random_batch(obs, act, batch, gen).items()}
             for _ in range(updates)] for _ in range(n)]
    members = [make_algorithm(cfg.algorithm, env_spaces(cfg.env), device=device, seed=k)
               for k in range(n)]
    out: dict[str, Any] = {"members": n, "batch": batch, "device": device}
    group = OffPolicyStack(members)
    for name, step in (("own", lambda: [m.learn_batches(data[k]) for k, m in
                                         enumerate(members)]),
                       ("stacked", lambda: group.learn_batches(data))):
        step()  # warm-up (and the first Adam step's state)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        out[f"{name}_updates_s"] = n * updates * calls / (time.perf_counter() - start)
    out["ratio"] = out["stacked_updates_s"] / out["own_updates_s"]
    return out


def rate_mixed_batches(n: int, updates: int, calls: int, device: str, seed: int = 0
                       ) -> dict[str, Any]:
    """Updates/s over ``n`` MADDPG members whose batch sizes evolved apart (log-uniform in
    the main job's range, 8 to 512): their own updates; one stack, every batch padded to the
    largest; and one stack per power-of-two bucket of sizes, padded to the bucket's largest."""
    from distmarl.algorithms.groups import OffPolicyStack
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(CONFIG)
    env = env_spaces(cfg.env)
    rng = np.random.default_rng(seed)
    sizes = [round(float(np.exp(rng.uniform(np.log(8), np.log(512))))) for _ in range(n)]
    gen = torch.Generator().manual_seed(0)
    data = [[{f: {a: t.to(device) for a, t in cols.items()}
              for f, cols in random_batch(env[0], env[1], size, gen).items()}
             for _ in range(updates)] for size in sizes]
    members = [make_algorithm(cfg.algorithm, env, device=device, seed=k) for k in range(n)]
    buckets: dict[int, list[int]] = {}
    for k, size in enumerate(sizes):
        buckets.setdefault(int(np.ceil(np.log2(size))), []).append(k)
    padded = OffPolicyStack(members)
    bucketed = [(ks, OffPolicyStack([members[k] for k in ks])) for ks in buckets.values()]
    ways = {
        "own": lambda: [m.learn_batches(data[k]) for k, m in enumerate(members)],
        "padded": lambda: padded.learn_batches(data),
        "bucketed": lambda: [g.learn_batches([data[k] for k in ks]) for ks, g in bucketed]}
    out: dict[str, Any] = {"members": n, "batch_sizes": sizes, "buckets": len(buckets),
                           "device": device}
    for name, step in ways.items():
        step()
        start = time.perf_counter()
        for _ in range(calls):
            step()
        out[f"{name}_updates_s"] = n * updates * calls / (time.perf_counter() - start)
    return out


def random_fragment(algo: Any, obs: dict[str, spaces.Space], state: spaces.Space | None,
                    steps: int, envs: int, gen: torch.Generator) -> dict[str, Any]:
    """A ``(T, E, ...)`` fragment acted by ``algo`` on random observations (and states)."""
    fields = algo.spec.fields
    out: dict[str, dict[str, list[Any]]] = {f: {a: [] for a in obs} for f in fields}
    for _ in range(steps):
        o = {a: torch.randn(envs, *s.shape, generator=gen).numpy() for a, s in obs.items()}
        st = (torch.randn(envs, *state.shape, generator=gen).numpy()
              if algo.spec.global_state and state is not None else None)
        actions, extras = algo.act_with_info(o, state=st)
        next_value = algo.value_estimates(o, st)
        for a in obs:
            row = {"obs": o[a], "action": actions[a],
                   "reward": torch.randn(envs, generator=gen).numpy(),
                   "terminated": torch.zeros(envs, dtype=torch.bool).numpy(),
                   "truncated": torch.zeros(envs, dtype=torch.bool).numpy(),
                   "active": torch.ones(envs, dtype=torch.bool).numpy(),
                   "log_prob": extras["log_prob"][a], "value": extras["value"][a],
                   "next_value": next_value[a], "state": st}
            for f in fields:
                out[f][a].append(row[f])
    return {f: {a: torch.as_tensor(np.stack(v)) for a, v in per.items()}
            for f, per in out.items()}


def rate_on_policy(n: int, calls: int, device: str, sets: Sequence[str] = ()
                   ) -> dict[str, Any]:
    """Fragments learned per second over ``n`` MAPPO members, their own and stacked
    (``sets``: config overrides)."""
    from distmarl.algorithms.groups import OnPolicyStack
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(ON_POLICY_CONFIG, list(sets))
    env = env_spaces(cfg.env)
    members = [make_algorithm(cfg.algorithm, env, device=device, seed=k) for k in range(n)]
    gen = torch.Generator().manual_seed(0)
    frags = [random_fragment(m.clone(), env[0], env[2], int(cfg.algorithm.hp.learn_step),
                             cfg.env.num_envs, gen) for m in members]
    out: dict[str, Any] = {"members": n, "batch": int(cfg.algorithm.hp.batch_size),
                           "device": device, "algorithm": cfg.algorithm.name}
    group = OnPolicyStack(members)
    for name, step in (("own", lambda: [m.learn(f) for m, f in zip(members, frags)]),
                       ("stacked", lambda: group.learn(frags))):
        step()
        start = time.perf_counter()
        for _ in range(calls):
            step()
        out[f"{name}_updates_s"] = n * calls / (time.perf_counter() - start)
    out["ratio"] = out["stacked_updates_s"] / out["own_updates_s"]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--updates", type=int, default=32, help="updates per call")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    ap.add_argument("--on-policy", action="store_true", help="MAPPO fragments instead")
    ap.add_argument("--mixed-batches", action="store_true",
                    help="MADDPG members of evolved batch sizes: padded or bucketed stacks")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for n in args.sizes if args.mixed_batches else []:
        r = rate_mixed_batches(n, args.updates, args.calls, args.device)
        rows.append(r)
        print(f"{n:>3} members, batch sizes {r['batch_sizes']} ({r['buckets']} buckets), "
              f"{args.device}: own {r['own_updates_s']:7,.0f} updates/s, one padded stack "
              f"{r['padded_updates_s']:7,.0f}, a stack per bucket "
              f"{r['bucketed_updates_s']:7,.0f}", flush=True)
    for n in args.sizes if args.on_policy and not args.mixed_batches else []:
        r = rate_on_policy(n, args.calls, args.device)
        rows.append(r)
        print(f"{n:>3} members, MAPPO fragments, {args.device}: own {r['own_updates_s']:6.2f} "
              f"updates/s, stacked {r['stacked_updates_s']:6.2f}, stacked/own "
              f"{r['ratio']:.2f}x", flush=True)
    for n in [] if args.on_policy or args.mixed_batches else args.sizes:
        for b in args.batches:
            r = rate(n, b, args.updates, args.calls, args.device)
            rows.append(r)
            print(f"{n:>3} members, batch {b:>5}, {args.device}: own {r['own_updates_s']:8,.0f} "
                  f"updates/s, stacked {r['stacked_updates_s']:8,.0f}, stacked/own "
                  f"{r['ratio']:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"threads": args.threads, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
