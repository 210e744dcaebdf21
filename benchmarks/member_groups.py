"""Members updated as one stacked computation against each member's own updates.

The main job's algorithm and networks (``examples/configs/speaker_listener_maddpg.yaml``:
MADDPG, 64-wide networks, mpe2 speaker-listener's spaces); ``N`` members, each with its own
batches, updated ``--updates`` times per call (a learner's train call):

* ``own``: each member's ``learn_batches``, one member after another (what a learner hosting
  several members does without groups, or N one-member learners sharing a device);
* ``stacked``: :class:`distmarl.algorithms.groups.StackedOffPolicy` over the N members (gather,
  one vmapped update per step, write back).

Prints updates/s over all members for each and their ratio, per population size and batch
size, on the device given (``cuda`` where torch sees a GPU, else ``cpu``), with ``--threads``
torch threads on CPU.

    .venv/bin/python -m benchmarks.member_groups [--sizes 4 16] [--batches 256 1024]
        [--updates 32] [--calls 3] [--device cpu] [--threads 1] [--json groups.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from gymnasium import spaces

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "speaker_listener_maddpg.yaml"


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


def rate(n: int, batch: int, updates: int, calls: int, device: str) -> dict[str, Any]:
    """Updates/s over ``n`` members for their own updates and for the stacked ones."""
    from distmarl.algorithms.groups import StackedOffPolicy
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
    group = StackedOffPolicy(members)
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


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--updates", type=int, default=32, help="updates per call")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for n in args.sizes:
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
