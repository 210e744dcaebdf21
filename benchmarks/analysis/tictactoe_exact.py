"""A tictactoe player's exact results against uniformly random legal play (not a test).

A deterministic policy (a member acting by arg-max) meets random play on a game tree small
enough to walk whole: every position where the random player moves branches into its legal
moves, each with equal probability. The walk gives the player's win / draw / loss
probabilities as the first and as the second player, with no sampling noise, where 200
played games measure a 2% loss rate within about one percentage point either way. It also
lists the player's blunders: positions it reaches whose move lowers the game-theoretic result
(a draw given away, say), weighted by how often random play leads there.

States are tuples of 9 squares from the player to move's view (1 its mark, -1 the
opponent's, 0 empty); observations are built as PettingZoo's ``tictactoe_v3`` gives them
(``(3, 3, 2)``: the mover's marks, then the opponent's; square ``a`` is ``reshape(9)[a]``).

    .venv/bin/python -m benchmarks.analysis.tictactoe_exact RUN_DIR [--member N]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from distmarl.league.references import tictactoe_values

State = tuple[int, ...]
_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
EMPTY: State = (0,) * 9


def after(state: State, square: int) -> State:
    """The state after the mover marks ``square``, from the next mover's view."""
    return tuple(-x for x in (*state[:square], 1, *state[square + 1:]))


def last_mover_won(state: State) -> bool:
    """The player who just moved (``-1`` in the mover's view) has a line."""
    return any(all(state[i] == -1 for i in line) for line in _LINES)


def ended(state: State) -> bool:
    """The player who just moved has a line, or the board is full."""
    return last_mover_won(state) or 0 not in state


def positions() -> list[State]:
    """Every position reachable in play with a move still to make, each once."""
    seen: set[State] = set()
    out: list[State] = []
    stack = [EMPTY]
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        if not ended(s):
            out.append(s)
            stack += [after(s, a) for a in range(9) if s[a] == 0]
    return out


def policy_moves(algo: Any, agent: str, states: Sequence[State]) -> dict[State, int]:
    """``algo``'s deterministic move (``act(..., explore=False)``) as ``agent`` in every state,
    asked in one batch."""
    board = np.asarray(states, dtype=np.int8).reshape(-1, 3, 3)
    obs = np.stack([board == 1, board == -1], axis=-1).astype(np.int8)
    mask = (np.asarray(states) == 0).astype(np.int8)
    moves = algo.act({agent: {"observation": obs, "action_mask": mask}}, explore=False)[agent]
    return {s: int(m) for s, m in zip(states, moves)}


def outcomes(move: Callable[[State], int], first: bool) -> tuple[float, float, float]:
    """The player's (win, draw, loss) probabilities against uniformly random legal play,
    playing first or second; ``move`` gives its square in each state."""

    @cache
    def value(s: State, mine: bool) -> tuple[float, float, float]:
        if last_mover_won(s):
            return (0.0, 0.0, 1.0) if mine else (1.0, 0.0, 0.0)
        if 0 not in s:
            return (0.0, 1.0, 0.0)
        if mine:
            return value(after(s, move(s)), False)
        legal = [a for a in range(9) if s[a] == 0]
        parts = np.array([value(after(s, a), True) for a in legal])
        return tuple(float(x) for x in parts.mean(axis=0))  # type: ignore[return-value]

    return value(EMPTY, first)


def blunders(move: Callable[[State], int], first: bool) -> list[tuple[float, State, int, float]]:
    """Positions the player reaches against random play where its move has a lower
    game-theoretic result than the best one (win > draw > loss): ``(probability of reaching
    it, state, the move, how much the result dropped: 1 or 2)``, likeliest first."""
    reach: dict[State, float] = {}
    stack: list[tuple[State, bool, float]] = [(EMPTY, first, 1.0)]
    while stack:
        s, mine, p = stack.pop()
        if ended(s):
            continue
        if mine:
            reach[s] = reach.get(s, 0.0) + p
            stack.append((after(s, move(s)), False, p))
        else:
            legal = [a for a in range(9) if s[a] == 0]
            stack += [(after(s, a), True, p / len(legal)) for a in legal]
    out = []
    for s, p in reach.items():
        values = tictactoe_values(s)
        drop = np.sign(max(values.values())) - np.sign(values[move(s)])
        if drop > 0:
            out.append((p, s, move(s), float(drop)))
    return sorted(out, reverse=True)


#: seat -> PettingZoo's agent holding it (``player_1`` moves first)
SEATS = {"first": "player_1", "second": "player_2"}


def seat_moves(algo: Any) -> dict[str, Callable[[State], int]]:
    """A member's move in every position, as the first and as the second player."""
    states = positions()
    return {seat: policy_moves(algo, agent, states).__getitem__
            for seat, agent in SEATS.items()}


def member_outcomes(algo: Any) -> dict[str, tuple[float, float, float]]:
    """A member's exact (win, draw, loss) against random play as the first and the second
    player."""
    return {seat: outcomes(move, seat == "first") for seat, move in seat_moves(algo).items()}


def load_last(run_dir: Path, member: int | None = None) -> tuple[Any, int, str]:
    """Member ``member`` (None: the run's elite) of ``run_dir``'s last checkpoint (or of the
    checkpoint ``run_dir`` itself): ``(algorithm, member index, checkpoint path)``."""
    from distmarl.checkpoint import list_checkpoints
    from distmarl.collect.evaluation import load_member

    found = list_checkpoints(run_dir / "checkpoints")
    _, algo, index, where = load_member(found[-1] if found else run_dir, member)
    return algo, index, where


def _board(s: State) -> str:
    marks = "".join({1: "X", -1: "O", 0: "."}[x] for x in s)
    return f"{marks[:3]}|{marks[3:6]}|{marks[6:]}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="a tictactoe run directory or checkpoint")
    ap.add_argument("--member", type=int, help="default: the run's elite")
    args = ap.parse_args(argv)
    algo, index, where = load_last(args.run_dir, args.member)
    print(f"member {index} of {where}")
    for seat, move in seat_moves(algo).items():
        w, d, lost = outcomes(move, seat == "first")
        print(f"  as the {seat} player: win {100 * w:.2f}%, draw {100 * d:.2f}%, "
              f"loss {100 * lost:.2f}%")
        for p, s, a, drop in blunders(move, seat == "first")[:5]:
            print(f"    reached {100 * p:.2f}%: {_board(s)} (X to move) played {a}, "
                  f"{'a loss' if drop == 2 else 'one result'} below the best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
