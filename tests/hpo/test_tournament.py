"""Tournament selection plans: deterministic, elitist, in the proportions its rule implies."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from distmarl.hpo import TournamentSelection, mean_fitness


def test_fitness_is_the_mean_of_the_last_eval_loop_evaluations() -> None:
    assert mean_fitness([1.0, 2.0, 9.0, 11.0], eval_loop=2) == 10.0
    assert mean_fitness([3.0], eval_loop=5) == 3.0
    assert mean_fitness([], eval_loop=1) == float("-inf")


def test_same_seed_same_plan() -> None:
    sel = TournamentSelection(tournament_size=2, elitism=True, population_size=6, eval_loop=1)
    hist = [[float(x)] for x in [3, 1, 4, 1, 5, 9]]
    a = sel.select(hist, np.random.default_rng(7))
    b = sel.select(hist, np.random.default_rng(7))
    assert a == b
    assert any(sel.select(hist, np.random.default_rng(s)).sources != a.sources for s in range(10))


def test_elite_passes_unchanged_and_first() -> None:
    sel = TournamentSelection(tournament_size=3, elitism=True, population_size=5, eval_loop=2)
    hist = [[0.0, 1.0], [5.0, 6.0], [9.0, -9.0], [2.0, 2.0], [1.0, 1.0]]  # means .5 5.5 0 2 1
    for seed in range(20):
        plan = sel.select(hist, np.random.default_rng(seed))
        assert plan.elite == 1 and plan.sources[1] == 1 and plan.order[0] == 1
        assert (1, 1) not in plan.copies()
        assert all(src != member for member, src in plan.copies())


def test_without_elitism_every_member_is_a_tournament() -> None:
    sel = TournamentSelection(tournament_size=1, elitism=False, population_size=4, eval_loop=1)
    plan = sel.select([[1.0], [2.0], [3.0], [4.0]], np.random.default_rng(0))
    assert plan.elite is None and plan.order == (0, 1, 2, 3)


def test_tournament_picks_members_in_the_proportions_its_rule_implies() -> None:
    n, t, draws = 6, 3, 30_000
    sel = TournamentSelection(tournament_size=t, elitism=False, population_size=n, eval_loop=1)
    fitness = [5.0, 1.0, 3.0, 6.0, 2.0, 4.0]  # ranks: member 3 best, then 0, 5, 2, 4, 1
    rng = np.random.default_rng(0)
    wins = np.bincount([sel.tournament(fitness, rng) for _ in range(draws)], minlength=n) / draws
    order = np.argsort(fitness)[::-1]
    # the rank-k member wins when it is drawn and no better one is: C(n-1-k, t-1) / C(n, t)
    expected = np.zeros(n)
    for k, member in enumerate(order):
        expected[member] = comb(n - 1 - k, t - 1) / comb(n, t)
    np.testing.assert_allclose(wins, expected, atol=0.01)
    assert wins[1] == 0.0  # the worst member can never win a tournament of 3


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"tournament_size": 0}, "tournament_size must be in"),
        ({"tournament_size": 9}, "tournament_size must be in"),
        ({"population_size": 0, "tournament_size": 1}, "population_size must be >= 1"),
        ({"eval_loop": 0}, "eval_loop must be >= 1"),
    ],
)
def test_bad_selection_config(kwargs, words) -> None:
    args = {"tournament_size": 2, "elitism": True, "population_size": 4, "eval_loop": 1, **kwargs}
    with pytest.raises(ValueError, match=words):
        TournamentSelection(**args)


def test_histories_must_cover_the_population() -> None:
    sel = TournamentSelection(2, True, 4, 1)
    with pytest.raises(ValueError, match="expected fitness histories of 4 members, got 3"):
        sel.select([[1.0]] * 3, np.random.default_rng(0))


def test_league_tournaments_stay_within_each_side() -> None:
    from distmarl.hpo.tournament import select_by_side

    sides = ["predators", "predators", "predators", "prey", "prey", "prey"]
    # each side's best is its last member; a predator's rating says nothing of a prey's
    histories = [[1.0], [2.0], [3.0], [-5.0], [-4.0], [-3.0]]
    selection = TournamentSelection(2, True, 3, 1)
    for seed in range(20):
        plan = select_by_side(selection, histories, sides, np.random.default_rng(seed))
        assert all(sides[src] == sides[m] for m, src in enumerate(plan.sources))
        assert plan.elites == (2, 5) and plan.elite == 2 and plan.order[:2] == (2, 5)
        assert plan.sources[2] == 2 and plan.sources[5] == 5
    with pytest.raises(ValueError, match="5 fitness histories for 6 members"):
        select_by_side(selection, histories[:5], sides, np.random.default_rng(0))


def test_a_mixed_populations_algorithms_hold_tournaments_of_their_own_sizes() -> None:
    from distmarl.hpo.tournament import select_by_side

    algos = ["MADDPG", "MADDPG", "MATD3", "MATD3", "MATD3"]
    # MATD3's members are all better than MADDPG's, yet a MADDPG member never copies one:
    # its state would not load into a MADDPG learner
    histories = [[-30.0], [-20.0], [-5.0], [-1.0], [-9.0]]
    selection = TournamentSelection(2, True, 5, 1)
    sources = set()
    for seed in range(30):
        plan = select_by_side(selection, histories, algos, np.random.default_rng(seed))
        assert all(algos[src] == algos[m] for m, src in enumerate(plan.sources))
        assert plan.elites == (1, 3) and plan.sources[1] == 1 and plan.sources[3] == 3
        sources |= {(m, s) for m, s in enumerate(plan.sources) if m != s}
    assert (0, 1) in sources and (2, 3) in sources  # the losers of each group do copy
