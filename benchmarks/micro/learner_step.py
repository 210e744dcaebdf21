"""Which way a learner runs its update step (``resources.learner_step``), measured: what
``auto`` picks is set from this.

The main job's MADDPG (prioritised replay's importance weights, ``--updates`` updates per call
of ``--batch`` rows), stacks of each ``--sizes`` members, one torch thread, each way in a fresh
process (compilations and captures are made once per process): member-updates/s of

* ``eager``: operation by operation, with the host's decisions (the default on CPU);
* ``static``: the step a CUDA graph captures (tensors alone), run eagerly;
* ``compiled``: that step through ``torch.compile`` (inductor), batches padded to buckets;
* ``graph`` (CUDA only): that step captured as a CUDA graph and replayed;

and the first call's seconds (where the compilation or capture happens). Then the buckets:
how many step shapes the batch sizes of the main job's evolution range (8 to 512) make,
exactly and padded, and the rows padding adds on average over that range.

    .venv/bin/python -m benchmarks.micro.learner_step [--sizes 1 16] [--ways eager static
        compiled] [--device cpu] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.micro.against import PRELUDE, ROOT
from distmarl.studies.stats import fmt_mean_se

#: one way's figures in a fresh process: first call's seconds, then member-updates/s
PROBE = PRELUDE + """
from benchmarks.micro.member_groups import members_and_batches
from distmarl.algorithms.groups import OffPolicyStack
size, way, batch, updates, calls, device = (int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                                            int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
members, data = members_and_batches(range(size), batch, updates, device)
weights = [[torch.rand(batch, generator=torch.Generator().manual_seed(100 * k + u)).to(device)
            + 0.5 for u in range(updates)] for k in range(size)]
stack = OffPolicyStack(members, mode=way)
def call():
    stack.learn_batches(data, weights)
    if device == "cuda":
        torch.cuda.synchronize()
start = time.perf_counter()
call()
first = time.perf_counter() - start
print(json.dumps({"first_call_s": first, "rate": rate(call, calls, size * updates),
                  "fallbacks": len(members[0].step.log.fallbacks)}))
"""


def measure(size: int, way: str, batch: int, updates: int, calls: int, device: str
            ) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), str(size), way, str(batch),
                          str(updates), str(calls), device], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def buckets(low: int = 8, high: int = 512) -> dict[str, float]:
    """Step shapes the batch sizes ``low..high`` make, exact and padded, and the mean rows
    a padded batch has per row it holds."""
    from distmarl.algorithms.offpolicy.prepare import bucket

    sizes = range(low, high + 1)
    return {"exact_shapes": len(sizes), "bucket_shapes": len({bucket(n) for n in sizes}),
            "mean_padding": sum(bucket(n) / n for n in sizes) / len(sizes)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16])
    p.add_argument("--ways", nargs="+", default=["eager", "static", "compiled"],
                   choices=["eager", "static", "compiled", "graph"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--updates", type=int, default=32)
    p.add_argument("--calls", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    for size in args.sizes:
        figures: dict[str, list[dict[str, float]]] = {w: [] for w in args.ways}
        for r in range(args.rounds):  # the ways alternate, so drift falls on all alike
            for way in args.ways:
                f = measure(size, way, args.batch, args.updates, args.calls, args.device)
                figures[way].append(f)
                print(f"{size} members, round {r + 1}, {way}: {f['rate']:.1f} member-updates/s,"
                      f" first call {f['first_call_s']:.1f} s, fallbacks {f['fallbacks']:.0f}",
                      flush=True)
        eager = [f["rate"] for f in figures[args.ways[0]]]
        for way, fs in figures.items():
            rates = [f["rate"] for f in fs]
            ratio = [x / e for x, e in zip(rates, eager, strict=True)]
            first = [f["first_call_s"] for f in fs]
            print(f"{size} members, {way}: {fmt_mean_se(rates, '.1f')} member-updates/s, "
                  f"{fmt_mean_se(ratio, '.3f')}x {args.ways[0]}, first call "
                  f"{fmt_mean_se(first, '.2f')} s")
    b = buckets()
    print(f"batch sizes 8-512: {b['exact_shapes']} step shapes exactly, {b['bucket_shapes']} "
          f"padded to buckets; padded rows per row {b['mean_padding']:.3f} on average")


if __name__ == "__main__":
    main()
