"""Does a masked-action population learn connect four? A trained elite against uniformly
random legal play.

Per seed: one ``distmarl train`` of the config (default ``examples/configs/connect_four_ippo.yaml``,
the two players sharing one self-play policy), then its elite (from the last checkpoint) plays
``--games`` games against :class:`~distmarl.collect.RandomPolicy` restricted to legal moves,
half as the first player, half as the second. Every move goes through the env, which refuses
an illegal one: a finished benchmark is also a check that no masked action was played. Prints
the win, draw and loss rates per seed and the win rate's mean and standard error, beside
random against random on the same games (the first mover's edge). The runs are a sweep
(:mod:`distmarl.studies.sweep`) in ``--out``: a second call with the same folder trains only
the seeds it lacks.

:mod:`benchmarks.learning.league` measures the league configs, whose runs play their own final
games against reference players; this benchmark measures the configs without a league
(``connect_four_ippo.yaml``, ``connect_four_maddpg.yaml``), whose runs play none.

    .venv/bin/python -m benchmarks.learning.connect_four [--config PATH] [--seeds 0 1 2]
        [--steps 200000] [--games 200] [--out DIR]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, RUNS, exit_status
from distmarl.studies.plan import SweepPlan
from distmarl.studies.stats import mean_se
from distmarl.studies.sweep import finished_runs, run_sweep

CONFIG = CONFIGS / "connect_four_ippo.yaml"
PLAYERS = ("player_0", "player_1")


def play(run_dir: Path, games: int, seed: int) -> dict[str, Any]:
    """The elite of ``run_dir`` against random legal play, and random against random."""
    from distmarl.collect import RandomPolicy, Seats, episode_returns
    from distmarl.collect.evaluation import load_member
    from distmarl.factory import make_venv

    cfg, elite, member, _ = load_member(run_dir / "checkpoints")
    venv = make_venv(cfg.env, mode="sync", seed=seed)
    try:
        actions = {a: venv.single_action_space(a) for a in venv.possible_agents}
        outcomes: dict[str, list[float]] = {"trained": [], "random": []}
        for k, seat in enumerate(PLAYERS):
            for who, policy in (("trained", elite), ("random", RandomPolicy(actions, seed + 7))):
                other = PLAYERS[1 - k]
                seats = Seats({seat: policy, other: RandomPolicy(actions, seed + 100 + k)})
                per_env = -(-games // 2 // venv.num_envs)
                returns = episode_returns(venv, seats, per_env, seed=seed + k)[: games // 2]
                outcomes[who] += [r[seat] for r in returns]
    finally:
        venv.close()
    return {"member": member, **{f"{who}_{kind}": rate(xs, kind) for who, xs in outcomes.items()
                                 for kind in ("win", "draw", "loss")}}


def rate(returns: Sequence[float], kind: str) -> float:
    """Share of games won (return > 0), drawn (0) or lost (< 0)."""
    test = {"win": lambda r: r > 0, "draw": lambda r: r == 0, "loss": lambda r: r < 0}[kind]
    return sum(1 for r in returns if test(r)) / len(returns)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=200_000, help="env steps per member")
    ap.add_argument("--games", type=int, default=200)
    ap.add_argument("--out", type=Path, help="the sweep's folder: runs finished there are not "
                    "trained again (default: runs/benchmarks/connect_four/<config name>)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every training run (repeatable)")
    args = ap.parse_args(argv)
    args.out = args.out or RUNS / "connect_four" / args.config.stem
    plan = SweepPlan.of(args.config, args.seeds, None, [
        "tracking.mlflow=false", f"training.max_steps_per_member={args.steps}", *args.set])
    outcome = run_sweep(plan, args.out, say=lambda line: print(line, flush=True))
    rows = []
    for run, summary in finished_runs(plan, args.out):
        row = {"seed": run.seed, **play(run.run_dir, args.games, run.seed)}
        rows.append(row)
        print(f"seed {run.seed}: trained elite wins {row['trained_win']:.1%}, draws "
              f"{row['trained_draw']:.1%}, loses {row['trained_loss']:.1%} of {args.games} "
              f"games against random legal play (random against random wins "
              f"{row['random_win']:.1%}); {summary['wall_seconds']:.0f} s", flush=True)
    if rows:
        m, se = mean_se([r["trained_win"] for r in rows])
        se_shown = float("nan") if se is None else se  # one seed: no standard error
        print(f"win rate against random legal play: {m:.1%} +- {se_shown:.1%} "
              f"(seeds {[r['seed'] for r in rows]}, {args.games} "
              f"games each, {args.steps:,} env steps per member)")
    return outcome.exit_status()


if __name__ == "__main__":
    raise SystemExit(exit_status(main))
