"""Train one member in one process with distmarl's reference trainer (no Ray, no MLflow).

    .venv/bin/python examples/train_reference.py [config.yaml] --steps 200000 \
        [--set algorithm.name=MAPPO]

Without a config file it trains IPPO on mpe2 ``simple_spread_v3``
(:data:`distmarl.reference.SPREAD_IPPO`). The trainer is picked by the algorithm's family
(:func:`distmarl.reference.train_reference`).
"""

from __future__ import annotations

import argparse
import copy

from distmarl.config import apply_overrides, config_from_dict, load_config
from distmarl.reference import SPREAD_IPPO, train_reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="YAML config (default: SPREAD_IPPO)")
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=None, help="default: the config's seed")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.config:
        cfg = load_config(args.config, args.set)
    else:
        cfg = config_from_dict(apply_overrides(copy.deepcopy(SPREAD_IPPO), args.set))
    result = train_reference(cfg, args.steps, args.seed, args.eval_every)
    print(f"done: {result.env_steps} env steps, {result.updates} updates in "
          f"{result.wall_seconds:.1f} s ({result.env_steps_per_s:.0f} env steps/s, "
          f"{result.learn_seconds:.1f} s learning)")


if __name__ == "__main__":
    main()
