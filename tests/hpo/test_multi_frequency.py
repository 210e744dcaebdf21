"""MF-PBT plans: brackets, clones of winners, asymmetric migration into open slots."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.hpo.multi_frequency import MultiFrequency, brackets


def test_brackets_round_each_share_and_keep_a_winner_and_a_loser() -> None:
    assert brackets(4, 0.25, 0.25, 0.25) == (1, 1, 1)
    assert brackets(8, 0.25, 0.25, 0.25) == (2, 2, 2)
    assert brackets(2, 0.25, 0.25, 0.25) == (1, 0, 1)
    assert brackets(1, 0.25, 0.25, 0.25) == (1, 0, 0)
    assert brackets(3, 0.5, 0.5, 0.5) == (2, 0, 1)  # never more slots than members


def test_losers_clone_winners_and_open_slots_take_better_foreigners() -> None:
    # sub-population 0 (fast): 0-3; 1 (slow): 4-7
    mf = MultiFrequency([[0, 1, 2, 3], [4, 5, 6, 7]], 0.25, 0.25, 0.25)
    fitness = {0: -10.0, 1: -20.0, 2: -30.0, 3: -40.0, 4: -5.0, 5: -25.0, 6: -35.0, 7: -50.0}
    step = mf.step_of(1, fitness, np.random.default_rng(0))
    # slow ranks 4, 5 | 6 open | 7 loser: 7 clones 4; 6 (-35) takes the best faster member 0
    # (-10), weights only, keeping its elite 4's hyperparameters
    assert step.clones == ((7, 4),)
    assert [(m.member, m.source, m.weights_only, m.elite) for m in step.migrations] == [
        (6, 0, True, 4)]
    fast = mf.step_of(0, fitness, np.random.default_rng(0))
    # fast: 0 | 1 | 2 open | 3 loser; 2 (-30) takes slower 4 (-5) in full
    assert fast.clones == ((3, 0),)
    assert [(m.member, m.source, m.weights_only) for m in fast.migrations] == [(2, 4, False)]
    assert fast.copies() == [(3, 0), (2, 4)]


def test_no_migrant_when_no_foreigner_is_better_or_evaluated() -> None:
    mf = MultiFrequency([[0, 1, 2, 3], [4, 5]], 0.25, 0.25, 0.25)
    fitness = {0: 1.0, 1: 0.0, 2: -1.0, 3: -2.0, 4: -9.0}  # 5 not evaluated yet
    assert mf.step_of(0, fitness, np.random.default_rng(0)).migrations == ()


def test_clones_draw_among_winners_and_members_stay_in_one_subpopulation() -> None:
    mf = MultiFrequency([list(range(8))], 0.25, 0.25, 0.0)
    fitness = {m: -float(m) for m in range(8)}
    drawn = {mf.step_of(0, fitness, np.random.default_rng(s)).clones for s in range(20)}
    assert all(src in (0, 1) and m in (6, 7) for c in drawn for m, src in c)
    assert len({src for c in drawn for _, src in c}) == 2
    with pytest.raises(ValueError, match="a member is in two sub-populations"):
        MultiFrequency([[0, 1], [1, 2]], 0.25, 0.25, 0.25)
