"""What a rollout worker holds, against another version of distmarl's (a worktree of an earlier
commit): its member's algorithm as the worker builds it, and the process's resident memory.

For each example config given, a fresh process imports distmarl, builds the config's vector
env, then the member's algorithm as a rollout worker does (``make_algorithm``; where the tree
has policies, ``learner=False``) and its collector, and collects one chunk. It reports the
resident set size (``VmRSS``) after the imports, after building and after collecting, and the
bytes of tensors the algorithm holds (networks, target copies, optimiser state). Each tree's
process runs ``--rounds`` times, the two trees alternating.

    .venv/bin/python -m benchmarks.micro.worker_memory --baseline /path/to/worktree
        [--configs speaker_listener_maddpg pistonball_ippo] [--rounds 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.micro.against import ROOT, alternate
from distmarl.studies.stats import fmt_mean_se

#: run in the measured tree: prints one JSON line
PROBE = """
import inspect, json, sys
sys.path.insert(0, sys.argv[1])

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

import torch
torch.set_num_threads(1)
from distmarl.config import load_config
from distmarl.factory import env_spaces, make_algorithm, make_venv
from distmarl.collect import Collector
out = {"imports_mb": rss_mb()}
cfg = load_config(sys.argv[2], [])
spaces = env_spaces(cfg.env)
policy = "learner" in inspect.signature(make_algorithm).parameters
algo = make_algorithm(cfg.algorithm, spaces, device="cpu", seed=0,
                      **({"learner": False} if policy else {}))
venv = make_venv(cfg.env, seed=0, global_state=algo.spec.global_state)
collector = Collector(venv, algo, seed=0, spec=algo.spec)
out["built_mb"] = rss_mb()
collector.collect(int(sys.argv[3]))
out["collected_mb"] = rss_mb()
nets = algo.nets
tensors = [p for n in nets.online.values() for p in n.parameters()]
tensors += [p for n in nets.target.values() for p in n.parameters()]
tensors += [x for o in nets.optim.values() for s in o.state.values() for x in s.values()]
out["algorithm_kb"] = sum(t.numel() * t.element_size() for t in tensors) / 1024
out["networks"] = len(nets.online) + len(nets.target)
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a worktree of another commit")
    p.add_argument("--configs", nargs="+", default=["speaker_listener_maddpg", "pistonball_ippo"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=64, help="vectorised steps collected")
    args = p.parse_args(argv)
    for name in args.configs:
        config = ROOT / "examples" / "configs" / f"{name}.yaml"
        sides = alternate(PROBE, args.baseline, args.rounds, [str(config), str(args.steps)],
                          show=False)
        for side, runs in sides.items():
            print(f"{name} {side}: " + ", ".join(
                f"{k} {fmt_mean_se([r[k] for r in runs])}" for k in runs[0]), flush=True)
        paired = [t["collected_mb"] - b["collected_mb"]
                  for t, b in zip(sides["this"], sides["baseline"], strict=True)]
        print(f"{name}: resident after collecting, this - baseline: {fmt_mean_se(paired)} MB")

if __name__ == "__main__":
    main()
