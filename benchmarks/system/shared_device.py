"""One learner updating a group of members as a stack, against one learner process per member.

``N`` members of the main job's MADDPG (``examples/configs/speaker_listener_maddpg.yaml``, its
networks and spaces) each learn from their own batches of ``--batch`` rows, ``--updates``
updates per train call, for ``--seconds`` of back-to-back calls:

* ``stacked``: one process, the ``N`` members as one
  :class:`~distmarl.algorithms.groups.OffPolicyStack` on ``--device`` (what a learner hosting
  the group does), its step run as ``--mode`` says (``graph``: captured as a CUDA graph);
* ``apart``: ``N`` processes, one member each, all on ``--device`` (``N`` one-member learners
  sharing that GPU), started together behind a barrier;
* ``apart-cpu``: ``N`` processes, one member and one torch thread each (``N`` CPU learners on
  the machine's cores).

Prints updates/s over all members for each, and the stacked rate's ratio to the others. Rates
of the processes are their updates over the span from the first start to the last finish.

    python -m benchmarks.system.shared_device [--members 16] [--batch 1024] [--updates 32]
        [--seconds 10] [--device cuda] [--mode eager|static|graph]
        [--ways stacked apart apart-cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.micro.member_groups import members_and_batches

WAYS = ("stacked", "apart", "apart-cpu")


def _timed(call: Callable[[], object], seconds: float, device: str,
           before: Callable[[], object] = lambda: None) -> tuple[int, float, float]:
    """Calls of ``call`` done in ``seconds`` after one warm-up call and ``before()``; the count
    and the wall-clock start and end (on a GPU, after its queued work is done)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    call()
    sync()
    before()
    count, start = 0, time.time()
    while time.time() - start < seconds:
        call()
        count += 1
    sync()
    return count, start, time.time()


def stacked(n: int, batch: int, updates: int, seconds: float, device: str,
            mode: str = "eager") -> float:
    """Updates/s of ``n`` members stacked in this process, the step run in ``mode``."""
    from distmarl.algorithms.groups import OffPolicyStack

    members, data = members_and_batches(range(n), batch, updates, device)
    group = OffPolicyStack(members, mode=mode)  # type: ignore[arg-type]
    count, start, end = _timed(lambda: group.learn_batches(data), seconds, device)
    return n * updates * count / (end - start)


def _one_member(k: int, batch: int, updates: int, seconds: float, device: str,
                barrier: Any, out: Any) -> None:
    """A process's work in ``apart``: member ``k`` alone, reported as (updates, start, end)."""
    torch.set_num_threads(1)
    (member,), (data,) = members_and_batches([k], batch, updates, device)
    count, start, end = _timed(lambda: member.learn_batches(data), seconds, device,
                               before=barrier.wait)
    out.put((count * updates, start, end))


def apart(n: int, batch: int, updates: int, seconds: float, device: str) -> float:
    """Updates/s of ``n`` one-member processes on ``device``, over all of them."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_one_member, args=(k, batch, updates, seconds, device,
                                                   barrier, out)) for k in range(n)]
    for p in procs:
        p.start()
    done = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return sum(u for u, _, _ in done) / (max(e for _, _, e in done) - min(s for _, s, _ in done))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--updates", type=int, default=32, help="updates per train call")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the stacked way")
    ap.add_argument("--mode", choices=("eager", "static", "graph"), default="eager",
                    help="how the stacked way runs its step")
    ap.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    where = (torch.cuda.get_device_name(torch.device(args.device))
             if args.device.startswith("cuda") else "CPU")
    shape = (args.members, args.batch, args.updates, args.seconds)
    rates: dict[str, float] = {}
    for way in args.ways:
        if way == "stacked":
            rates[way] = stacked(*shape, args.device, args.mode)
        else:
            rates[way] = apart(*shape, "cpu" if way == "apart-cpu" else args.device)
        label = f"{way}, {args.mode}" if way == "stacked" else way
        print(f"{args.members} members, batch {args.batch}, {label} "
              f"({'CPU' if way == 'apart-cpu' else where}): {rates[way]:,.0f} updates/s",
              flush=True)
    if "stacked" in rates:
        for way in (w for w in rates if w != "stacked"):
            print(f"stacked / {way}: {rates['stacked'] / rates[way]:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"device": where, "members": args.members,
                                         "batch": args.batch, "updates": args.updates,
                                         "threads": args.threads, "mode": args.mode,
                                         "rates": rates}, indent=1))


if __name__ == "__main__":
    main()
