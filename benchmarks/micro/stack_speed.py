"""The learner's update against another version of distmarl's (a worktree of an earlier commit).

Off-policy: the main job's MADDPG (``examples/configs/speaker_listener_maddpg.yaml``),
prioritised replay's importance weights, ``--updates`` updates per call of ``--batch`` rows.
On-policy (``--on-policy``): MAPPO of ``examples/configs/spread_mappo.yaml``, one whole
fragment per update (its ``learn_step`` steps of every sub-env, acted by the member's policy on
random observations). One torch thread. Each measurement runs in a fresh process, this tree's
and the baseline's alternating ``--rounds`` times (the machine's drift falls on both alike);
per side, in updates/s of one member:

* ``one``: one member's own update (``learn_batches``; ``learn`` of a fragment);
* ``own16``: 16 members' own updates, one member after another;
* ``stack16``: the 16 members in one stack (this tree's ``OffPolicyStack`` or
  ``OnPolicyStack``; the baseline's stack where it has one).

Prints each round and the mean with its standard error, and the ratios of this tree's
``one`` and ``stack16`` to the baseline's ``one`` and ``own16``.

    .venv/bin/python -m benchmarks.micro.stack_speed --baseline /path/to/worktree [--rounds 5]
        [--on-policy]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.micro.against import PRELUDE, alternate
from distmarl.studies.stats import fmt_mean_se

#: run in the measured tree (after :data:`~benchmarks.micro.against.PRELUDE`): one JSON line
PROBE = PRELUDE + """
from benchmarks.micro.member_groups import members_and_batches
batch, updates, calls = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
members, data = members_and_batches(range(16), batch, updates, "cpu")
weights = [[torch.rand(batch, generator=torch.Generator().manual_seed(100 * k + u)) + 0.5
            for u in range(updates)] for k in range(16)]
try:
    from distmarl.algorithms.groups import OffPolicyStack as Stack
except ImportError:
    from distmarl.algorithms.groups import StackedOffPolicy as Stack
out = {"one": rate(lambda: members[0].learn_batches(data[0], weights[0]), calls, updates)}
out["own16"] = rate(lambda: [m.learn_batches(data[k], weights[k])
                             for k, m in enumerate(members)], max(1, calls // 4), 16 * updates)
stack = Stack(members)
out["stack16"] = rate(lambda: stack.learn_batches(data, weights), max(1, calls // 2),
                      16 * updates)
print(json.dumps(out))
"""

#: the on-policy form of :data:`PROBE` (``batch`` and ``updates`` unused: a fragment each)
PROBE_ON_POLICY = PRELUDE + """
from benchmarks.micro.member_groups import ON_POLICY_CONFIG, random_fragment
from distmarl.config import load_config
from distmarl.factory import env_spaces, make_algorithm
calls = int(sys.argv[4])
cfg = load_config(ON_POLICY_CONFIG, [])
env = env_spaces(cfg.env)
members = [make_algorithm(cfg.algorithm, env, device="cpu", seed=k) for k in range(16)]
gen = torch.Generator().manual_seed(0)
frags = [random_fragment(m.clone(), env[0], env[2], int(cfg.algorithm.hp.learn_step),
                         cfg.env.num_envs, gen) for m in members]
try:
    from distmarl.algorithms.groups import OnPolicyStack as Stack
except ImportError:
    from distmarl.algorithms.groups import StackedOnPolicy as Stack
out = {"one": rate(lambda: members[0].learn(frags[0]), calls, 1)}
out["own16"] = rate(lambda: [m.learn(f) for m, f in zip(members, frags)], 1, 16)
stack = Stack(members)
out["stack16"] = rate(lambda: stack.learn(frags), 1, 16)
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a worktree of another commit")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--updates", type=int, default=32)
    p.add_argument("--calls", type=int, default=6)
    p.add_argument("--on-policy", action="store_true", help="MAPPO fragments instead")
    args = p.parse_args(argv)
    sides = alternate(PROBE_ON_POLICY if args.on_policy else PROBE, args.baseline, args.rounds,
                      [str(args.batch), str(args.updates), str(args.calls)])
    for side, runs in sides.items():
        print(f"{side}: " + ", ".join(f"{k} {fmt_mean_se([x[k] for x in runs])}"
                                      for k in runs[0]))
    paired = [(t["one"] / b["one"], t["stack16"] / b["own16"])
              for t, b in zip(sides["this"], sides["baseline"], strict=True)]
    print("ratios per round (one / one, stack16 / own16): "
          + "; ".join(f"{a:.3f}, {b:.2f}" for a, b in paired))
    for i, name in enumerate(("one / baseline one", "stack16 / baseline own16")):
        print(f"{name}: {fmt_mean_se([x[i] for x in paired], '.3f')}")


if __name__ == "__main__":
    main()
