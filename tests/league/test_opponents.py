"""A worker's opponents: members rebuilt from weights only when their version changes,
references by name, snapshots dropped when they leave."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.config import load_config
from distmarl.factory import env_spaces, make_algorithm
from distmarl.league.opponents import Opponents
from distmarl.league.references import LookaheadConnectFour

C4 = "examples/configs/connect_four_ippo.yaml"


def test_members_follow_their_weights_version_and_references_are_built_once() -> None:
    cfg = load_config(C4)
    spaces = env_spaces(cfg.env)
    ops = Opponents(cfg.algorithm, spaces, cfg.env.kwargs, seed=0)
    source = make_algorithm(cfg.algorithm, spaces, seed=5)
    w1 = source.get_weights()
    first = ops.player("member/1", 1, w1)
    assert ops.player("member/1", 1, None) is first  # held: not fetched again
    obs = {"player_0": {"observation": np.zeros((3, 6, 7, 2), np.int8),
                        "action_mask": np.ones((3, 7), np.int8)}}
    np.testing.assert_array_equal(first.act(obs, explore=False)["player_0"],
                                  source.act(obs, explore=False)["player_0"])
    other = make_algorithm(cfg.algorithm, spaces, seed=6)
    again = ops.player("member/1", 2, other.get_weights())
    assert again is first and ops.version("member/1") == 2  # the same object, new weights
    np.testing.assert_array_equal(again.act(obs, explore=False)["player_0"],
                                  other.act(obs, explore=False)["player_0"])
    with pytest.raises(ValueError, match=r"weights of version 3 are needed \(held: 2\)"):
        ops.player("member/1", 3, None)
    ref = ops.reference("ref/lookahead", ["player_0", "player_1"])
    assert isinstance(ref, LookaheadConnectFour)
    assert ops.reference("ref/lookahead", ["player_0"]) is ref
    ops.player("snapshot/0", 0, w1)
    ops.keep_only(["member/1", "ref/lookahead"])
    assert set(ops.held) == {"member/1", "ref/lookahead"}
