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

``--resume EARLIER.json`` continues each seed's run of an earlier ``--json`` (a copy of it:
the earlier run stays as it was) from its last checkpoint to ``--steps``, so a longer budget
can be measured in stages; give the same ``--set`` overrides as the earlier runs had.
``--json`` stores each run as it ends (:mod:`benchmarks.harness`); a second call with the same
file runs only the runs it lacks.

    .venv/bin/python -m benchmarks.learning.league [--games-list tictactoe connect_four simple_tag]
        [--seeds 0 1 2] [--steps N] [--games 200] [--json results.json] [--set KEY=VALUE]
        [--resume earlier.json]
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import CONFIGS
from benchmarks.harness import Results, Run, run_all, train_cli
from distmarl.studies.stats import mean_se


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


def game_run(game: str, seed: int, steps: int, games: int, overrides: Sequence[str] = (),
             resumed_from: str | None = None) -> Run:
    """The run of ``game``'s example league at ``seed``: ``steps`` env steps per member,
    ``games`` final games per opponent, the user's ``overrides`` last; ``resumed_from``: the
    earlier ``--json`` whose run of this game and seed it continues."""
    return Run.of(CONFIGS / GAMES[game][0], seed,
                  [f"training.max_steps_per_member={steps}",
                   f"evolution.final_episodes={games}", *overrides],
                  game=game, resumed_from=resumed_from)


def measure(run: Run, earlier: dict[tuple[str, int], Path]) -> dict[str, Any]:
    """Train ``run`` in its own process (continuing its earlier run directory in ``earlier``,
    if any) and read its final games: the figures, the target, ratings and the run
    directory."""
    game = run.label("game")
    assert run.seed is not None
    _, _, figures, met = GAMES[game]
    trained = train_cli(run.config, run.sets, resume=earlier.get((game, run.seed)),
                        prefix=f"league-{game}-{run.seed}-")
    assert trained.summary is not None
    f = figures(trained.summary, trained.run_dir)
    return {"figures": f, "met": met(f), "seconds": trained.seconds,
            "ratings": ratings(trained.summary), "run_dir": str(trained.run_dir)}


def earlier_runs(path: Path, games: Sequence[str], seeds: Sequence[int]
                 ) -> dict[tuple[str, int], Path]:
    """(game, seed) -> its run directory in an earlier ``--json`` (ValueError naming what is
    missing: every game and seed asked for must be there, its run directory still on disk)."""
    records = Results(path).records
    runs: dict[tuple[str, int], Path] = {}
    for game in games:
        by_seed = {r["seed"]: Path(r["run_dir"]) for r in records if r.get("game") == game}
        for seed in seeds:
            run = by_seed.get(seed)
            if run is None or not (run / "checkpoints").is_dir():
                raise ValueError(f"--resume {path}: no {game} run of seed {seed} with "
                                 f"checkpoints (found {run})")
            runs[game, seed] = run
    return runs


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
    ap.add_argument("--json", type=Path, help="results file: each run stored as it ends; "
                                               "runs already there are not run again")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for every game's runs (repeatable)")
    ap.add_argument("--resume", metavar="EARLIER.json",
                    help="continue each seed's run of an earlier --json to --steps")
    args = ap.parse_args(argv)
    earlier = earlier_runs(Path(args.resume), args.games_list, args.seeds) if args.resume else {}
    store = Results(args.json)
    for game in args.games_list:
        steps = args.steps or GAMES[game][1]

        def progress(r: dict[str, Any], game: str = game) -> None:
            f = r["figures"]
            print(f"{game} seed {r['seed']} ({r['seconds']:.0f} s): "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in f.items())
                  + f"; ratings {r['ratings']}; target {'met' if r['met'] else 'missed'}",
                  flush=True)

        runs = run_all([game_run(game, seed, steps, args.games, args.set, args.resume)
                        for seed in args.seeds],
                       functools.partial(measure, earlier=earlier), store, on_record=progress)
        print(f"\n{game}: {steps:,} env steps per member, {args.games} games per opponent, "
              f"seeds {args.seeds}" + (f", overrides {args.set}" if args.set else "")
              + (f", resumed from {args.resume}" if args.resume else ""))
        for key in runs[0]["figures"]:
            print(f"  {key}: {percent_mean_se([r['figures'][key] for r in runs])}")
        print(f"  target met in {sum(r['met'] for r in runs)} of {len(runs)} seeds\n",
              flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
