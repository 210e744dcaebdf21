"""League decisions without Ray: the match record, PFSP weights and opponents, the bounded
snapshot pool."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.league.plans import (
    MatchRecord,
    SnapshotPool,
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


def test_opponents_come_from_members_and_snapshots_by_share_and_pfsp() -> None:
    rec = MatchRecord()
    for _ in range(20):
        rec.record("member/0", "snapshot/0", 1.0)  # snapshot 0 is beaten, snapshot 1 unplayed
    rng = np.random.default_rng(0)
    picks = [choose_opponent("member/0", ["member/0", "member/1"], ["snapshot/0", "snapshot/1"],
                             rec, rng, current_share=0.25) for _ in range(4000)]
    share = {o: picks.count(o) / len(picks) for o in set(picks)}
    assert "member/0" not in share
    assert share["member/1"] == pytest.approx(0.25, abs=0.03)
    # within the snapshots: (1 - 20.5/21)^2 against (1 - 0.5)^2
    w0, w1 = (1 - 20.5 / 21) ** 2, 0.25
    assert share["snapshot/1"] == pytest.approx(0.75 * w1 / (w0 + w1), abs=0.03)
    again = [choose_opponent("member/0", ["member/0", "member/1"], ["snapshot/0", "snapshot/1"],
                             rec, np.random.default_rng(0), current_share=0.25)
             for _ in range(1)]
    assert again == picks[:1]  # the generator decides
    # no snapshots yet: the other members; alone: self-play
    assert choose_opponent("member/0", ["member/0", "member/1"], [], rec, rng) == "member/1"
    assert choose_opponent("member/0", ["member/0"], [], rec, rng) == "member/0"
    with pytest.raises(ValueError, match="current_share must be within"):
        choose_opponent("member/0", ["member/1"], [], rec, rng, current_share=1.5)


def test_references_take_their_share_of_training_games_weighted_by_pfsp() -> None:
    rec = MatchRecord()
    for _ in range(20):
        rec.record("member/0", "ref/random", 1.0)  # random is beaten, minimax unplayed
    rng = np.random.default_rng(1)
    picks = [choose_opponent("member/0", ["member/0", "member/1"], ["snapshot/0"], rec, rng,
                             current_share=0.5, references=["ref/random", "ref/minimax"],
                             reference_share=0.4) for _ in range(4000)]
    share = {o: picks.count(o) / len(picks) for o in set(picks)}
    w_random, w_minimax = (1 - 20.5 / 21) ** 2, 0.25
    assert share["ref/minimax"] == pytest.approx(0.4 * w_minimax / (w_random + w_minimax),
                                                 abs=0.03)
    assert share["member/1"] == pytest.approx(0.6 * 0.5, abs=0.03)
    assert share["snapshot/0"] == pytest.approx(0.6 * 0.5, abs=0.03)
    with pytest.raises(ValueError, match="reference_share must be within"):
        choose_opponent("member/0", ["member/1"], [], rec, rng, references=["ref/random"],
                        reference_share=-0.1)


def test_self_play_takes_its_share_of_the_games_not_against_references() -> None:
    rng = np.random.default_rng(3)
    picks = [choose_opponent("member/0", ["member/0", "member/1"], ["snapshot/0"], MatchRecord(),
                             rng, current_share=0.5, references=["ref/random"],
                             reference_share=0.2, self_share=0.5) for _ in range(4000)]
    share = {o: picks.count(o) / len(picks) for o in set(picks)}
    assert share["ref/random"] == pytest.approx(0.2, abs=0.03)
    assert share["member/0"] == pytest.approx(0.8 * 0.5, abs=0.03)
    assert share["member/1"] == pytest.approx(0.8 * 0.5 * 0.5, abs=0.03)
    assert share["snapshot/0"] == pytest.approx(0.8 * 0.5 * 0.5, abs=0.03)
    # self_share 0 draws exactly as before it existed (seeded runs repeat)
    a, b = np.random.default_rng(4), np.random.default_rng(4)
    assert ([choose_opponent("member/0", ["member/1"], ["snapshot/0"], MatchRecord(), a)
             for _ in range(50)]
            == [choose_opponent("member/0", ["member/1"], ["snapshot/0"], MatchRecord(), b,
                                self_share=0.0) for _ in range(50)])
    with pytest.raises(ValueError, match="self_share must be within"):
        choose_opponent("member/0", ["member/1"], [], MatchRecord(), rng, self_share=1.5)
    # a symmetric game seats the learner in both seats; an asymmetric one cannot
    matches = plan_matches("member/0", "player_0", ["player_0", "player_1"],
                           {"player_0": ["member/0", "member/1"]}, {}, MatchRecord(), rng, 8,
                           symmetric=True, self_share=1.0)
    assert all(set(m.seats.values()) == {"member/0"} for m in matches)
    with pytest.raises(ValueError, match="only a symmetric game can"):
        plan_matches("member/0", "prey", ["predators", "prey"],
                     {"predators": ["member/1"], "prey": ["member/0"]}, {}, MatchRecord(), rng,
                     2, self_share=0.5)


def test_references_may_be_weighed_among_themselves_unlike_the_rest() -> None:
    rec = MatchRecord()
    for _ in range(20):
        rec.record("member/0", "ref/random", 1.0)  # random is beaten, minimax unplayed
        rec.record("member/0", "snapshot/0", 1.0)  # and so is one snapshot
    rng = np.random.default_rng(2)
    picks = [choose_opponent("member/0", ["member/0", "member/1"], ["snapshot/0", "snapshot/1"],
                             rec, rng, current_share=0.5,
                             references=["ref/random", "ref/minimax"], reference_share=0.4,
                             reference_weighting="uniform")
             for _ in range(4000)]
    share = {o: picks.count(o) / len(picks) for o in set(picks)}
    # uniform among the references: the beaten one keeps half of the reference games
    assert share["ref/random"] == pytest.approx(0.2, abs=0.03)
    assert share["ref/minimax"] == pytest.approx(0.2, abs=0.03)
    # the snapshots keep hard PFSP: the beaten one is hardly drawn
    w_beaten, w_unplayed = (1 - 20.5 / 21) ** 2, 0.25
    assert share["snapshot/1"] == pytest.approx(0.3 * w_unplayed / (w_beaten + w_unplayed),
                                                abs=0.03)
    assert share.get("snapshot/0", 0.0) < 0.01


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
    current = {"predators": ["member/0", "member/1"], "prey": ["member/2"]}
    snaps = {"prey": ["snapshot/0"]}
    matches = plan_matches("member/0", "predators", ["predators", "prey"], current, snaps, rec,
                           rng, games=200, current_share=0.5)
    assert all(m.learner_side == "predators" and m.seats["predators"] == "member/0"
               for m in matches)
    prey = [m.seats["prey"] for m in matches]
    assert set(prey) == {"member/2", "snapshot/0"}
    assert prey.count("member/2") / len(prey) == pytest.approx(0.5, abs=0.1)
    with pytest.raises(ValueError, match="side 'good', which is not one of"):
        plan_matches("member/0", "good", ["predators", "prey"], current, snaps, rec, rng, 1)


def test_in_a_symmetric_game_the_learner_takes_each_seat_in_turn() -> None:
    seats = ["player_0", "player_1"]
    pool = {"player_0": ["member/0", "member/1", "member/2"]}
    matches = plan_matches("member/1", "player_0", seats, pool, {}, MatchRecord(),
                           np.random.default_rng(0), games=4, symmetric=True)
    assert [m.learner_side for m in matches] == ["player_0", "player_1"] * 2
    for m in matches:
        other = m.seats[seats[1 - seats.index(m.learner_side)]]
        assert m.seats[m.learner_side] == "member/1" and other in {"member/0", "member/2"}
