"""League decisions without Ray: the match record, PFSP weights and opponents, the bounded
snapshot pool."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.league.plans import (
    DEFAULT_OPPONENTS,
    MatchRecord,
    OpponentSource,
    SnapshotPool,
    check_sources,
    choose_opponent,
    pfsp_weights,
    plan_matches,
)


def test_the_record_keeps_both_views_and_win_rates_start_at_one_half() -> None:
    rec = MatchRecord()
    assert rec.win_rate("a", "b") == 0.5
    for result in (1.0, 1.0, 0.5, 0.0):
        rec.record("a", "b", result)
    assert rec.counts[("a", "b")] == [2, 1, 1] and rec.counts[("b", "a")] == [1, 1, 2]
    assert rec.games("b", "a") == 4
    assert rec.win_rate("a", "b") == pytest.approx((2 + 0.5 + 0.5) / 5)
    assert rec.win_rate("a", "b") + rec.win_rate("b", "a") == pytest.approx(1.0)
    np.testing.assert_allclose(rec.matrix(["a", "b", "c"]),
                               [[0.5, 0.6, 0.5], [0.4, 0.5, 0.5], [0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"got 0\.25"):
        rec.record("a", "b", 0.25)
    again = MatchRecord()
    again.load_state_dict(rec.state_dict())
    assert again.counts == rec.counts
    rec.forget("b")
    assert rec.counts == {}


def test_pfsp_weights_favour_the_opponents_the_learner_loses_to() -> None:
    np.testing.assert_allclose(pfsp_weights([0.0, 0.5, 1.0], "hard"), [0.8, 0.2, 0.0])
    np.testing.assert_allclose(pfsp_weights([0.0, 0.5, 0.9], "variance"), [0.0, 0.25, 0.09] /
                               np.float64(0.34))
    np.testing.assert_allclose(pfsp_weights([0.2, 0.7], "uniform"), [0.5, 0.5])
    np.testing.assert_allclose(pfsp_weights([1.0, 1.0], "hard"), [0.5, 0.5])  # all beaten
    with pytest.raises(ValueError, match="unknown PFSP weighting 'harder'"):
        pfsp_weights([0.5], "harder")  # type: ignore[arg-type]


#: the current members and snapshots of a symmetric game's pool, and two references
POOLS = {"current": ["member/0", "member/1"], "snapshot": ["snapshot/0", "snapshot/1"],
         "reference": ["ref/random", "ref/minimax"]}


def shares_of(picks: list[str]) -> dict[str, float]:
    return {o: picks.count(o) / len(picks) for o in set(picks)}


def draws(pools: dict[str, list[str]], sources: list[OpponentSource], rec: MatchRecord,
          seed: int, n: int = 4000) -> list[str]:
    rng = np.random.default_rng(seed)
    return [choose_opponent("member/0", pools, sources, rec, rng) for _ in range(n)]


def test_each_source_takes_its_share_of_the_games_and_pfsp_weighs_within_it() -> None:
    """Over 4000 draws every source's share holds within 0.03, the learner never meets
    itself, and within the snapshots the unplayed one is drawn by its hard PFSP weight."""
    rec = MatchRecord()
    for _ in range(20):
        rec.record("member/0", "snapshot/0", 1.0)  # snapshot 0 is beaten, snapshot 1 unplayed
    sources = [OpponentSource("reference", 0.2), OpponentSource("current", 0.3),
               OpponentSource("snapshot", 0.5)]
    picks = draws(POOLS, sources, rec, seed=0)
    share = shares_of(picks)
    assert "member/0" not in share
    assert share["ref/random"] + share["ref/minimax"] == pytest.approx(0.2, abs=0.03)
    assert share["member/1"] == pytest.approx(0.3, abs=0.03)
    # within the snapshots: (1 - 20.5/21)^2 against (1 - 0.5)^2
    w0, w1 = (1 - 20.5 / 21) ** 2, 0.25
    assert share["snapshot/1"] == pytest.approx(0.5 * w1 / (w0 + w1), abs=0.03)
    # the generator decides, and the order the sources are listed in does not
    assert draws(POOLS, sources[::-1], rec, seed=0) == picks
    assert draws(POOLS, sources, rec, seed=1) != picks
    # a source with no share takes no game
    only = draws(POOLS, [OpponentSource("current", 1.0), OpponentSource("reference", 0.0)],
                 rec, seed=2, n=200)
    assert set(only) == {"member/1"}


def test_before_the_first_snapshot_the_snapshot_share_goes_to_the_current_members() -> None:
    """No snapshot yet: the current members take the snapshots' games, the references keep
    theirs; a learner with no other member plays the snapshots, and with neither itself."""
    sources = [OpponentSource("reference", 0.25), OpponentSource("current", 0.375),
               OpponentSource("snapshot", 0.375)]
    early = {"current": ["member/0", "member/1"], "snapshot": [], "reference": ["ref/random"]}
    share = shares_of(draws(early, sources, MatchRecord(), seed=3))
    assert share["ref/random"] == pytest.approx(0.25, abs=0.03)
    assert share["member/1"] == pytest.approx(0.75, abs=0.03)
    alone = {"current": ["member/0"], "snapshot": ["snapshot/0"], "reference": ["ref/random"]}
    share = shares_of(draws(alone, sources, MatchRecord(), seed=4))
    assert share["snapshot/0"] == pytest.approx(0.75, abs=0.03) and "member/0" not in share
    rng = np.random.default_rng(5)
    assert choose_opponent("member/0", {"current": ["member/0"]}, DEFAULT_OPPONENTS,
                           MatchRecord(), rng) == "member/0"
    with pytest.raises(ValueError, match="no opponent for 'member/0'"):
        choose_opponent("member/0", {}, DEFAULT_OPPONENTS, MatchRecord(), rng)


def test_a_side_without_references_shares_their_games_among_the_other_sources() -> None:
    """The reference share of a side no reference plays goes to the current members and the
    snapshots in proportion to their shares (3:1 here)."""
    sources = [OpponentSource("reference", 0.6), OpponentSource("current", 0.3),
               OpponentSource("snapshot", 0.1)]
    pools = {"current": ["member/2"], "snapshot": ["snapshot/0"], "reference": []}
    share = shares_of(draws(pools, sources, MatchRecord(), seed=6))
    assert share["member/2"] == pytest.approx(0.75, abs=0.03)
    assert share["snapshot/0"] == pytest.approx(0.25, abs=0.03)


def test_a_reference_source_s_weighting_applies_to_the_references_only() -> None:
    """``uniform`` among the references keeps beaten random play at half the reference games,
    while the snapshots' ``hard`` weighting all but drops the beaten snapshot."""
    rec = MatchRecord()
    for _ in range(20):
        rec.record("member/0", "ref/random", 1.0)  # random is beaten, minimax unplayed
        rec.record("member/0", "snapshot/0", 1.0)  # and so is one snapshot
    sources = [OpponentSource("reference", 0.4, "uniform"), OpponentSource("current", 0.3),
               OpponentSource("snapshot", 0.3, "hard")]
    share = shares_of(draws(POOLS, sources, rec, seed=2))
    assert share["ref/random"] == pytest.approx(0.2, abs=0.03)
    assert share["ref/minimax"] == pytest.approx(0.2, abs=0.03)
    w_beaten, w_unplayed = (1 - 20.5 / 21) ** 2, 0.25
    assert share["snapshot/1"] == pytest.approx(0.3 * w_unplayed / (w_beaten + w_unplayed),
                                                abs=0.03)
    assert share.get("snapshot/0", 0.0) < 0.01
    # hard among the references too: beaten random play is hardly drawn
    hard = [OpponentSource("reference", 0.4), *sources[1:]]
    assert shares_of(draws(POOLS, hard, rec, seed=2)).get("ref/random", 0.0) < 0.01


def test_bad_sources_are_refused_naming_the_source() -> None:
    """A share outside [0, 1], an unknown source or weighting, a source listed twice, shares
    that do not sum to 1: ValueErrors naming what is wrong."""
    with pytest.raises(ValueError, match=r"the snapshot share must be within \[0, 1\], got 1\.5"):
        OpponentSource("snapshot", 1.5)
    with pytest.raises(ValueError, match="unknown opponent source 'self'"):
        OpponentSource("self", 0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown PFSP weighting 'harder' for the current"):
        OpponentSource("current", 0.5, "harder")  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="opponent source 'current' is listed twice"):
        choose_opponent("member/0", POOLS, [OpponentSource("current", 0.5)] * 2, MatchRecord(),
                        rng)
    with pytest.raises(ValueError, match=r"shares sum to 0\.9, not 1"):
        plan_matches("member/0", "player_0", ["player_0", "player_1"], {"player_0": POOLS},
                     MatchRecord(), rng, 1, symmetric=True,
                     sources=[OpponentSource("current", 0.5), OpponentSource("snapshot", 0.4)])
    assert check_sources([OpponentSource("current", 0.1 + 0.2), OpponentSource("snapshot", 0.7)])


def test_the_pool_is_bounded_and_the_oldest_leave_first() -> None:
    pool = SnapshotPool(max_size=2)
    gone_all = []
    for g in range(4):
        snap, gone = pool.add(member=g % 2, generation=g)
        gone_all += gone
        assert snap.id == f"snapshot/{g}"
    assert pool.ids() == ["snapshot/2", "snapshot/3"]
    assert [s.id for s in gone_all] == ["snapshot/0", "snapshot/1"]
    again = SnapshotPool(1)
    again.load_state_dict(pool.state_dict())
    assert again.ids() == pool.ids() and again.add(0, 5)[0].id == "snapshot/4"
    with pytest.raises(ValueError, match="max_size=0"):
        SnapshotPool(0)


def test_matches_seat_the_learner_on_its_side_and_opponents_from_the_other_sides() -> None:
    rec = MatchRecord()
    rng = np.random.default_rng(1)
    pools = {"predators": {"current": ["member/0", "member/1"]},
             "prey": {"current": ["member/2"], "snapshot": ["snapshot/0"]}}
    matches = plan_matches("member/0", "predators", ["predators", "prey"], pools, rec, rng,
                           games=200)
    assert all(m.learner_side == "predators" and m.seats["predators"] == "member/0"
               for m in matches)
    prey = [m.seats["prey"] for m in matches]
    assert set(prey) == {"member/2", "snapshot/0"}
    assert prey.count("member/2") / len(prey) == pytest.approx(0.5, abs=0.1)
    with pytest.raises(ValueError, match="side 'good', which is not one of"):
        plan_matches("member/0", "good", ["predators", "prey"], pools, rec, rng, 1)


def test_in_a_symmetric_game_the_learner_takes_each_seat_in_turn() -> None:
    seats = ["player_0", "player_1"]
    pool = {"player_0": {"current": ["member/0", "member/1", "member/2"]}}
    matches = plan_matches("member/1", "player_0", seats, pool, MatchRecord(),
                           np.random.default_rng(0), games=4, symmetric=True)
    assert [m.learner_side for m in matches] == ["player_0", "player_1"] * 2
    for m in matches:
        other = m.seats[seats[1 - seats.index(m.learner_side)]]
        assert m.seats[m.learner_side] == "member/1" and other in {"member/0", "member/2"}
