"""Torch operations dispatched per update step of a stack, against its number of members.

A stack's host work per step must not grow with its members: every operation dispatched is
host time (on CPU most of a small update's), so a step whose operations grow with the members
cannot scale. This counts the operations one step dispatches (``TorchDispatchMode``, CPU),
for stacks of 1, 16 and 64 members whose learning rates all differ (an evolved population's):

* MADDPG, the main job's networks and spaces: one update of every member
  (``OffPolicyStack``'s step over its prepared inputs; the host's preparation counted apart);
* MAPPO of ``examples/configs/spread_mappo.yaml``: one minibatch step of every member's PPO
  epochs (``OnPolicyStack``).

    .venv/bin/python -m benchmarks.micro.step_ops [--sizes 1 16 64] [--batch 256]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Counter(TorchDispatchMode):
    """Counts the operations dispatched while it is on."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], Any]) -> int:
    """Operations ``fn()`` dispatches."""
    with _Counter() as counter:
        fn()
    return counter.count


def _distinct_rates(members: Sequence[Any], names: Sequence[str]) -> None:
    for k, m in enumerate(members):
        for name in names:
            m.set_hyperparameter(name, m.hp[name] * (1 + k / (2 * len(members))))


def offpolicy_step_ops(members: int, batch: int = 256) -> dict[str, int]:
    """The main job's MADDPG, ``members`` stacked: operations of one update's step and of its
    preparation on the host."""
    from benchmarks.micro.member_groups import members_and_batches
    from distmarl.algorithms.groups import OffPolicyStack

    algos, data = members_and_batches(range(members), batch, 2, "cpu")
    _distinct_rates(algos, ("lr_actor", "lr_critic"))
    stack = OffPolicyStack(algos)
    stack.learn_batches([d[:1] for d in data])  # built, Adam states made
    runner, hp = stack._runner(), stack._hp()
    prepared: list[Any] = []
    prep = count_ops(lambda: prepared.append(stack._inputs([d[1] for d in data], hp, None)))
    step = count_ops(lambda: runner(stack.state, prepared[0][0]))
    return {"step": step, "prepare": prep}


def onpolicy_step_ops(members: int) -> dict[str, int]:
    """spread_mappo's MAPPO, ``members`` stacked: operations of one minibatch step."""
    from benchmarks.micro.member_groups import ON_POLICY_CONFIG, random_fragment
    from distmarl.algorithms.onpolicy.stack import OnPolicyStack
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(ON_POLICY_CONFIG, ["algorithm.hp.learn_step=16",
                                         "algorithm.hp.update_epochs=1"])
    env = env_spaces(cfg.env)
    algos = [make_algorithm(cfg.algorithm, env, seed=k) for k in range(members)]
    _distinct_rates(algos, ("lr",))
    gen = torch.Generator().manual_seed(0)
    frags = [random_fragment(m.clone(), env[0], env[2], 16, cfg.env.num_envs, gen)
             for m in algos]
    stack = OnPolicyStack(algos)
    counts: list[int] = []
    inner = stack._minibatch_step

    def counted(*args: Any) -> None:
        counts.append(count_ops(lambda: inner(*args)))

    stack._minibatch_step = counted  # type: ignore[method-assign]
    stack.learn(frags)
    return {"step": counts[-1]}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for n in args.sizes:
        off, on = offpolicy_step_ops(n, args.batch), onpolicy_step_ops(n)
        print(f"{n:>3} members: MADDPG step {off['step']} ops (host preparation "
              f"{off['prepare']}), MAPPO minibatch step {on['step']} ops", flush=True)


if __name__ == "__main__":
    main()
