"""The env's global state (``global_state=True``): ``infos["state"]`` after every reset and step,
the ending step's state in ``infos["final_state"]``, and ``true_next_state`` picking between them.

On mpe2 ``simple_spread`` the state is the three agents' observations side by side, which gives
an exact expected value for every row."""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.envs import make_vector_env, true_next_obs, true_next_state


def joint(obs: dict[str, np.ndarray], agents: list[str]) -> np.ndarray:
    return np.concatenate([obs[a] for a in agents], axis=1)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_state_and_final_state_follow_the_episode(mode: str) -> None:
    with make_vector_env("mpe2:simple_spread_v3", 3, mode=mode, seed=0, global_state=True,
                         continuous_actions=True, max_cycles=4) as venv:
        agents = venv.possible_agents
        assert venv.state_space.shape == (54,)
        obs, infos = venv.reset(seed=0)
        assert infos["state"].shape == (3, 54) and infos["state"].dtype == np.float32
        np.testing.assert_allclose(infos["state"], joint(obs, agents))
        rng = np.random.default_rng(0)
        ends = 0
        for step in range(9):
            actions = {a: rng.uniform(0, 1, (3, 5)).astype(np.float32) for a in agents}
            obs, _, _, _, infos = venv.step(actions)
            ended = infos["_final_obs"]
            assert ended.tolist() == [step % 4 == 3] * 3
            ends += int(ended.any())
            # the state of the returned observations (the reset ones after an autoreset) ...
            np.testing.assert_allclose(infos["state"], joint(obs, agents))
            # ... and the transition's next state is the ending step's, where one ended
            np.testing.assert_allclose(true_next_state(infos),
                                       joint(true_next_obs(obs, infos), agents))
            if ended.any():
                assert not np.allclose(infos["final_state"], infos["state"])
            else:
                assert np.isnan(infos["final_state"]).all()
        assert ends == 2


def test_without_global_state_no_state_is_returned() -> None:
    with make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", seed=0,
                         continuous_actions=True) as venv:
        _, infos = venv.reset(seed=0)
        assert venv.state_space is None and "state" not in infos


def test_an_env_without_a_state_space_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"TurnBasedParallel has no global "
                                         r"state to record.*state_space is None"):
        make_vector_env("pettingzoo.classic:tictactoe_v3", 2, mode="sync", global_state=True)
