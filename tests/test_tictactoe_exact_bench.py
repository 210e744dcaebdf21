"""The exact tictactoe walk of the league benchmark: known counts and values, and agreement
with played games."""

from __future__ import annotations

import numpy as np

from benchmarks.analysis.tictactoe_exact import (
    EMPTY,
    State,
    after,
    blunders,
    ended,
    last_mover_won,
    member_outcomes,
    outcomes,
    policy_moves,
    positions,
)
from distmarl.config import load_config
from distmarl.factory import env_spaces, make_algorithm
from distmarl.league.references import tictactoe_values


def first_empty(s: State) -> int:
    return s.index(0)


def perfect(s: State) -> int:
    values = tictactoe_values(s)
    return max(values, key=lambda a: (values[a], -a))


def test_the_walk_visits_every_position_with_a_move_to_make_once() -> None:
    states = positions()
    assert len(states) == len(set(states)) == 4520  # 5478 legal positions, 958 of them ended
    assert EMPTY in states and not any(ended(s) for s in states)


def test_perfect_play_never_loses_and_makes_no_blunder() -> None:
    for first in (True, False):
        win, draw, loss = outcomes(perfect, first)
        assert loss == 0.0 and abs(win + draw - 1.0) < 1e-12 and win > 0.9 - 0.2 * (not first)
        assert blunders(perfect, first) == []


def test_exact_results_match_played_games() -> None:
    rng = np.random.default_rng(0)
    games = 20_000
    for first in (True, False):
        counts = np.zeros(3)
        for _ in range(games):
            s, mine = EMPTY, first
            while not ended(s):
                a = first_empty(s) if mine else int(rng.choice([i for i in range(9) if s[i] == 0]))
                s, mine = after(s, a), not mine
            if not last_mover_won(s):
                counts[1] += 1  # a full board, no line: a draw
            else:  # the line is the last mover's: the side to move after it lost
                counts[2 if mine else 0] += 1
        exact = np.array(outcomes(first_empty, first))
        assert abs(exact.sum() - 1.0) < 1e-12
        # within 4 standard errors of 20,000 games
        assert np.all(np.abs(counts / games - exact) < 4 * np.sqrt(exact * (1 - exact) / games)
                      + 1e-9), (first, counts / games, exact)
    # playing the first empty square blunders: it walks into lines random play completes
    worst = blunders(first_empty, False)
    assert worst and worst[0][0] > 0 and {d for *_, d in worst} <= {1.0, 2.0}


def test_a_members_moves_are_legal_and_its_results_sum_to_one() -> None:
    cfg = load_config("examples/configs/tictactoe_ippo_league.yaml")
    algo = make_algorithm(cfg.algorithm, env_spaces(cfg.env), seed=0)
    states = positions()
    moves = policy_moves(algo, "player_1", states)
    assert all(s[moves[s]] == 0 for s in states)
    for win, draw, loss in member_outcomes(algo).values():
        assert abs(win + draw + loss - 1.0) < 1e-9 and loss > 0  # untrained: it loses some
