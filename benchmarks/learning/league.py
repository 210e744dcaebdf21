"""Do leagues learn competitive games? Each game's example league, trained per seed, then its
final games against references a user understands (not a test).

Per (game, seed): one ``distmarl train`` of the game's example config (``--steps`` env steps
per member), whose final evaluation plays every member against every reference
(``--games`` games each; a symmetric game's member takes each seat for half of them, so the
first move alternates), the sides' elites against each other, and random play against the
same references. The elite of a side is the member its rating ranks first (not the one that
did best in these games). Printed per seed and as mean +- standard error over the seeds:

* ``tictactoe`` (IPPO league of 4): the elite's loss rate against random legal play, and its
  draw-or-win rate against minimax. Target, in at least 2 of 3 seeds: at most 2% lost to
  random, at least 80% drawn or won against minimax. Also its exact loss probability against
  random play (:mod:`benchmarks.analysis.tictactoe_exact`: the whole game tree, no sampling noise).
* ``connect_four`` (IPPO league of 4, action masks): the elite's win rate against random legal
  play and against the one-step lookahead player. Target: at least 95% and at least 60%.
* ``simple_tag`` (MADDPG, 2 predator teams and 2 prey): a game is the predators' win when
  they catch the prey at least once in its 25 steps. Targets: the predators' elite catches the
  fleeing prey more often than random predators do; the prey's elite is caught by the
  predators' elite less often than random prey is.

Also printed: each side's best rating after the first generation and at the end (ratings are
OpenSkill ordinals on a scale where random play stays at 0).

Each game's runs are a sweep (:mod:`distmarl.studies.sweep`) in ``--out``/<game>: a second
call with the same folder trains only the runs it lacks. ``--resume EARLIER`` continues each
seed's run of an earlier ``--out`` (a copy of it: the earlier run stays as it was) from its
last checkpoint to ``--steps``, so a longer budget can be measured in stages; give the same
``--set`` overrides as the earlier runs had.

    .venv/bin/python -m benchmarks.learning.league [--games-list tictactoe connect_four simple_tag]
        [--seeds 0 1 2] [--steps N] [--games 200] [--out DIR] [--set KEY=VALUE]
        [--resume EARLIER]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS, RUNS, exit_status
from distmarl.studies.plan import SweepPlan, claim
from distmarl.studies.stats import mean_se
from distmarl.studies.sweep import finished_runs, run_sweep


def _rate(summary: dict[str, Any], player: str, opponent: str, key: str,
          kind: str = "member") -> float:
    """``player``'s ``key`` rate (win / draw / loss) against ``opponent`` in the final games."""
    for r in summary["final_games"]:
        if r["player"] == player and r["opponent"] == opponent and r["kind"] == kind:
            return float(r[key])
    raise KeyError(f"no final games of {player} against {opponent} ({kind})")


def _elite(summary: dict[str, Any], side: str | None = None) -> str:
    elites = summary["final_elites"]
    return f"member/{elites[side] if side else next(iter(elites.values()))}"


def exact_loss(run_dir: Path, member: int) -> float:
    """Member ``member``'s exact probability of losing to random play, as the first and the
    second player equally often (:mod:`benchmarks.analysis.tictactoe_exact`), from the run's last
    checkpoint."""
    from benchmarks.analysis.tictactoe_exact import load_last, member_outcomes

    algo, _, _ = load_last(run_dir, member)
    return sum(lost for *_, lost in member_outcomes(algo).values()) / 2


def tictactoe(s: dict[str, Any], run_dir: Path) -> dict[str, float]:
    e = _elite(s)
    return {"lost to random": _rate(s, e, "ref/random", "loss"),
            "exact loss to random": exact_loss(run_dir, int(e.removeprefix("member/"))),
            "drew or won vs minimax": 1.0 - _rate(s, e, "ref/minimax", "loss"),
            "random lost to random": _rate(s, "ref/random", "ref/random", "loss", "baseline"),
            "random drew or won vs minimax":
                1.0 - _rate(s, "ref/random", "ref/minimax", "loss", "baseline")}


def connect_four(s: dict[str, Any], run_dir: Path) -> dict[str, float]:
    e = _elite(s)
    return {"won vs random": _rate(s, e, "ref/random", "win"),
            "won vs lookahead": _rate(s, e, "ref/lookahead", "win"),
            "random won vs lookahead":
                _rate(s, "ref/random", "ref/lookahead", "win", "baseline")}


def simple_tag(s: dict[str, Any], run_dir: Path) -> dict[str, float]:
    pred, prey = _elite(s, "predators"), _elite(s, "prey")
    return {"elite predators catch flee": _rate(s, pred, "ref/flee", "win"),
            "random predators catch flee":
                _rate(s, "ref/random", "ref/flee", "win", "baseline"),
            "elite predators catch elite prey": _rate(s, pred, prey, "win", "elites"),
            "elite predators catch random prey": _rate(s, pred, "ref/random", "win")}


def _tictactoe_met(f: dict[str, float]) -> bool:
    return f["lost to random"] <= 0.02 and f["drew or won vs minimax"] >= 0.80


def _connect_four_met(f: dict[str, float]) -> bool:
    return f["won vs random"] >= 0.95 and f["won vs lookahead"] >= 0.60


def _simple_tag_met(f: dict[str, float]) -> bool:
    return (f["elite predators catch flee"] > f["random predators catch flee"]
            and f["elite predators catch elite prey"] < f["elite predators catch random prey"])


#: game -> (example config, default env steps per member, figures, target met)
GAMES: dict[str, tuple[str, int, Callable[[dict[str, Any], Path], dict[str, float]],
                       Callable[[dict[str, float]], bool]]] = {
    "tictactoe": ("tictactoe_ippo_league.yaml", 250_000, tictactoe, _tictactoe_met),
    "connect_four": ("connect_four_ippo_league.yaml", 600_000, connect_four, _connect_four_met),
    "simple_tag": ("simple_tag_maddpg_league.yaml", 200_000, simple_tag, _simple_tag_met),
}


def game_plan(game: str, seeds: Sequence[int], steps: int, games: int,
              overrides: Sequence[str] = ()) -> SweepPlan:
    """The sweep of ``game``'s example league at ``seeds``: ``steps`` env steps per member,
    ``games`` final games per opponent, the user's ``overrides`` last."""
    return SweepPlan.of(CONFIGS / GAMES[game][0], seeds, None, [
        "tracking.mlflow=false", f"training.max_steps_per_member={steps}",
        f"evolution.final_episodes={games}", *overrides])


def measure(game: str, summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A finished run's final games: the figures, the target, ratings and seconds."""
    _, _, figures, met = GAMES[game]
    f = figures(summary, run_dir)
    return {"figures": f, "met": met(f), "seconds": summary["wall_seconds"],
            "ratings": ratings(summary)}


def earlier_runs(earlier: Path, games: Sequence[str], seeds: Sequence[int]
                 ) -> dict[tuple[str, int], Path]:
    """(game, seed) -> its run directory in an earlier ``--out`` (ValueError naming what is
    missing: every game and seed asked for must be there, with its checkpoints)."""
    runs: dict[tuple[str, int], Path] = {}
    for game in games:
        for seed in seeds:
            run = earlier / game / "base" / f"seed-{seed}"
            if not (run / "checkpoints").is_dir():
                raise ValueError(f"--resume {earlier}: no {game} run of seed {seed} with "
                                 f"checkpoints ({run})")
            runs[game, seed] = run
    return runs


def continue_runs(plan: SweepPlan, out: Path, earlier: dict[tuple[str, int], Path],
                  game: str) -> None:
    """Start each run of ``plan`` in ``out`` not there yet as a copy of its earlier run
    (without its summary: the sweep resumes it from its last checkpoint)."""
    claim(out, plan)
    for run in plan.runs(out):
        source = earlier.get((game, run.seed))
        if source is not None and not run.run_dir.exists():
            shutil.copytree(source, run.run_dir, ignore=shutil.ignore_patterns("summary.json"))


def ratings(summary: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Side -> (best rating after the first generation, best at the end)."""
    sides = summary["league"]["member_sides"]
    out: dict[str, tuple[float, float]] = {}
    for side in dict.fromkeys(sides):
        hist = [m["fitness"] for m, s in zip(summary["members"], sides) if s == side]
        out[side] = (max(h[0] for h in hist), max(h[-1] for h in hist))
    return out


def percent_mean_se(xs: Sequence[float]) -> str:
    """Rates ``xs`` (0..1) as ``"m% +- se"`` in percentage points (``nan`` for one seed)."""
    m, se = mean_se(xs)
    return f"{100 * m:.1f}% +- {100 * (float('nan') if se is None else se):.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games-list", nargs="+", default=list(GAMES), choices=list(GAMES))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, help="env steps per member (default: per game)")
    ap.add_argument("--games", type=int, default=200, help="final games per opponent")
    ap.add_argument("--out", type=Path, default=RUNS / "league",
                    help="the sweeps' folder (one per game): runs finished there are not "
                         "trained again")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every game's runs (repeatable)")
    ap.add_argument("--resume", type=Path, metavar="EARLIER",
                    help="continue each seed's run of an earlier --out to --steps")
    args = ap.parse_args(argv)
    earlier = earlier_runs(args.resume, args.games_list, args.seeds) if args.resume else {}
    status = 0
    for game in args.games_list:
        steps = args.steps or GAMES[game][1]
        plan = game_plan(game, args.seeds, steps, args.games, args.set)
        continue_runs(plan, args.out / game, earlier, game)
        outcome = run_sweep(plan, args.out / game, say=lambda line: print(line, flush=True))
        if outcome.stop_signal is not None:
            return outcome.exit_status()
        status = max(status, outcome.exit_status())
        runs = []
        for run, summary in finished_runs(plan, args.out / game):
            r = measure(game, summary, run.run_dir)
            runs.append(r)
            print(f"{game} seed {run.seed} ({r['seconds']:.0f} s): "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["figures"].items())
                  + f"; ratings {r['ratings']}; target {'met' if r['met'] else 'missed'}",
                  flush=True)
        print(f"\n{game}: {steps:,} env steps per member, {args.games} games per opponent, "
              f"seeds {args.seeds}" + (f", overrides {args.set}" if args.set else "")
              + (f", resumed from {args.resume}" if args.resume else ""))
        for key in runs[0]["figures"] if runs else []:
            print(f"  {key}: {percent_mean_se([r['figures'][key] for r in runs])}")
        print(f"  target met in {sum(r['met'] for r in runs)} of {len(runs)} seeds\n",
              flush=True)
    return status


if __name__ == "__main__":
    sys.exit(exit_status(main))
