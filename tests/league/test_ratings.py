"""League ratings: known results give known ratings, references stay fixed, state round-trips."""

from __future__ import annotations

import math

import pytest

from distmarl.league.ratings import Ratings

MU, SIGMA, BETA, TAU = 25.0, 25.0 / 3, 25.0 / 6, 25.0 / 300


def bradley_terry(mu_a: float, sig_a: float, mu_b: float, sig_b: float, score: float
                  ) -> tuple[float, float]:
    """Weng and Lin's Bradley-Terry update of player a (full pairing, two players), by hand:
    sigma widened by tau first, c^2 = sig_a^2 + sig_b^2 + 2 beta^2, p = P(a beats b),
    mu += sig^2 / c * (score - p), sigma *= sqrt(1 - (sig / c) * sig^2 / c^2 * p (1 - p))."""
    sa2, sb2 = sig_a ** 2 + TAU ** 2, sig_b ** 2 + TAU ** 2
    c = math.sqrt(sa2 + sb2 + 2 * BETA ** 2)
    p = 1.0 / (1.0 + math.exp((mu_b - mu_a) / c))
    mu = mu_a + sa2 / c * (score - p)
    delta = (math.sqrt(sa2) / c) * sa2 / c ** 2 * p * (1 - p)
    return mu, math.sqrt(sa2) * math.sqrt(max(1 - delta, 1e-4))


def test_a_known_sequence_of_results_gives_known_ratings() -> None:
    r = Ratings()
    want = {"a": (MU, SIGMA), "b": (MU, SIGMA), "c": (MU, SIGMA)}
    for a, b, result in [("a", "b", 1.0), ("a", "c", 0.5), ("c", "b", 0.0), ("b", "a", 1.0)]:
        r.record(a, b, result)
        new_a = bradley_terry(*want[a], *want[b], result)
        new_b = bradley_terry(*want[b], *want[a], 1.0 - result)
        want[a], want[b] = new_a, new_b
    for p, (mu, sigma) in want.items():
        assert r.table[p] == pytest.approx((mu, sigma), abs=1e-9)
        assert r.ordinal(p) == pytest.approx(mu - 3 * sigma)
    assert r.matches == 4


def test_the_first_win_between_new_players_moves_each_mean_by_2_64() -> None:
    r = Ratings()
    r.record("a", "b", 1.0)
    assert r.mu("a") == pytest.approx(27.6354, abs=1e-4)
    assert r.mu("b") == pytest.approx(22.3646, abs=1e-4)


def test_equal_players_that_draw_keep_their_means_and_a_win_is_predicted_after_wins() -> None:
    r = Ratings()
    r.record("a", "b", 0.5)
    assert r.mu("a") == pytest.approx(MU) and r.mu("b") == pytest.approx(MU)
    assert r.win_probability("a", "b") == pytest.approx(0.5)
    for _ in range(5):
        r.record("a", "b", 1.0)
    assert r.win_probability("a", "b") > 0.8 and r.ordinal("a") > r.ordinal("b")


def test_fixed_references_anchor_the_scale_and_snapshots_start_where_their_member_stood() -> None:
    r = Ratings(fixed=["ref/random"])
    r.record("member/0", "ref/random", 1.0)
    assert r.table["ref/random"] == (MU, SIGMA)  # never moves
    assert r.mu("member/0") == pytest.approx(bradley_terry(MU, SIGMA, MU, SIGMA, 1.0)[0])
    r.add("snapshot/0", like="member/0")
    assert r.table["snapshot/0"] == r.table["member/0"]
    r.record("member/1", "member/0", 1.0)
    r.set_like("member/0", "member/1")  # member 0 copied member 1's weights
    assert r.table["member/0"] == r.table["member/1"]
    r.remove("snapshot/0")
    assert "snapshot/0" not in r.table


def test_bad_results_are_refused_and_state_round_trips() -> None:
    r = Ratings(fixed=["ref/random"])
    with pytest.raises(ValueError, match=r"1 \(win\), 0\.5 \(draw\) or 0 \(loss\), got 2"):
        r.record("a", "b", 2)
    with pytest.raises(ValueError, match="against itself"):
        r.record("a", "a", 1.0)
    assert r.table == {} and r.matches == 0  # nothing half-applied
    r.record_many([("a", "b", 1.0), ("b", "ref/random", 0.0)])
    again = Ratings()
    again.load_state_dict(r.state_dict())
    assert again.table == r.table and again.fixed == {"ref/random"} and again.matches == 2
