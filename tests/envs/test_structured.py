"""Dict observations with integer leaves, and PettingZoo's turn-based AEC conversion
(``info[agent]["active_agent"]``), on tic-tac-toe."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.envs import EnvFactory, VectorParallelEnv, make_env, true_next_obs

PLAYERS = ("player_1", "player_2")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tictactoe_dict_observations_and_turns(mode: str) -> None:
    single = make_env("pettingzoo.classic:tictactoe_v3")
    with VectorParallelEnv([EnvFactory("pettingzoo.classic:tictactoe_v3")] * 2, mode=mode) as venv:
        obs, infos = venv.reset(seed=0)
        ref, _ = single.reset(seed=0)
        # the first move is player_1's alone (the reset infos name the mover too)
        assert infos["agent_mask"]["player_1"].all() and not infos["agent_mask"]["player_2"].any()
        assert set(obs["player_1"]) == {"action_mask", "observation"}
        assert obs["player_1"]["observation"].shape == (2, 3, 3, 2)
        assert obs["player_1"]["observation"].dtype == np.int8
        np.testing.assert_array_equal(
            obs["player_2"]["action_mask"][0], ref["player_2"]["action_mask"]
        )
        mover = "player_1"
        for step in range(1, 10):
            # both sub-envs: the mover takes its first legal square
            move = obs[mover]["action_mask"].argmax(axis=1)
            actions = {p: move for p in PLAYERS}
            o, r, te, _, _ = single.step({p: int(move[0]) for p in PLAYERS})
            obs, rew, term, _, infos = venv.step(actions)
            nxt = true_next_obs(obs, infos)
            for p in PLAYERS:
                assert rew[p][0] == r[p] and term[p][0] == te[p]
                for key in ("observation", "action_mask"):
                    np.testing.assert_array_equal(nxt[p][key][0], o[p][key])
            if infos["_final_obs"].all():
                break
            mover = PLAYERS[step % 2]
            # only the player whose turn it is has its action used next
            assert infos["agent_mask"][mover].all()
            assert not infos["agent_mask"][PLAYERS[(step + 1) % 2]].any()
        assert step == 7  # player_1 takes squares 0, 2, 4, 6: the 2-4-6 diagonal wins
        assert term["player_1"].all() and rew["player_1"].tolist() == [1.0, 1.0]
        assert rew["player_2"].tolist() == [-1.0, -1.0]
        # the reset board is empty, the final one is not
        assert obs["player_1"]["observation"].sum() == 0
        assert infos["final_obs"]["player_1"]["observation"].sum() == 2 * 7
        # after the autoreset, again player_1's move alone
        assert infos["agent_mask"]["player_1"].all() and not infos["agent_mask"]["player_2"].any()
