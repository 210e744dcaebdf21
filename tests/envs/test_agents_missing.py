"""Dying and turn-taking agents: placeholders, masks, autoreset and env-defined actions."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from distmarl.envs import VectorParallelEnv, apply_env_defined_actions, true_next_obs
from tests.envs.toy_envs import DyingEnv, TurnEnv

DEATHS = [(1, 3, 5), (2, 2, 4)]  # per sub-env: the step at which d_0, d_1, d_2 terminate


def _obs(k: int, t: int, episode: int, last: float) -> list[float]:
    return [k, t, episode, last]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_dying_agents_get_placeholders_and_autoreset(mode: str) -> None:
    fns = [partial(DyingEnv, d) for d in DEATHS]
    agents = ["d_0", "d_1", "d_2"]
    with VectorParallelEnv(fns, mode=mode) as venv:
        obs, infos = venv.reset(seed=0)
        for a in agents:
            assert infos["active"][a].all() and infos["agent_mask"][a].all()
        t = np.zeros(2, dtype=int)  # step within the current episode, per sub-env
        episode = np.zeros(2, dtype=int)
        for step in range(1, 12):
            live_before = {a: infos["active"][a].copy() for a in agents}
            actions = {a: np.full(2, step % 4) for a in agents}
            obs, rew, term, trunc, infos = venv.step(actions)
            nxt = true_next_obs(obs, infos)
            t += 1
            for i, deaths in enumerate(DEATHS):
                ended = t[i] == max(deaths)
                assert infos["_final_obs"][i] == ended
                for k, a in enumerate(agents):
                    alive = t[i] <= deaths[k]  # observed at this step (dies at deaths[k])
                    assert live_before[a][i] == (t[i] - 1 < deaths[k])
                    if alive:
                        want = _obs(k, t[i], episode[i], step % 4)
                        np.testing.assert_array_equal(nxt[a][i], want)
                        assert rew[a][i] == 1.0 + k
                        assert term[a][i] == (t[i] == deaths[k])
                    else:  # dead: NaN placeholder, zero reward, terminated, inactive
                        assert np.isnan(nxt[a][i]).all()
                        assert rew[a][i] == 0.0 and term[a][i]
                    assert not trunc[a][i]
                    if ended:  # reset observation in obs, every agent back
                        np.testing.assert_array_equal(obs[a][i], _obs(k, 0, episode[i] + 1, -1))
                        assert infos["active"][a][i] and infos["agent_mask"][a][i]
                    else:
                        assert infos["active"][a][i] == (t[i] < deaths[k])
                        assert infos["agent_mask"][a][i] == infos["active"][a][i]
                        # at its death step an agent's last obs is real but it is inactive
                        assert np.isnan(obs[a][i]).all() == (t[i] > deaths[k])
                if ended:
                    t[i] = 0
                    episode[i] += 1
        assert episode.tolist() == [2, 2]  # 11 steps: episodes of 5 and 4 steps


def test_agents_missing_from_every_subenv_may_be_left_out() -> None:
    with VectorParallelEnv([partial(DyingEnv, (1, 9))] * 2, mode="sync") as venv:
        venv.reset()
        venv.step({"d_0": np.zeros(2), "d_1": np.zeros(2)})
        obs, _, term, *_ = venv.step({"d_1": np.zeros(2)})  # d_0 is dead everywhere
        assert np.isnan(obs["d_0"]).all() and term["d_0"].all()
        with pytest.raises(ValueError, match=r"no entry for agent 'd_1'.*sub-envs \[0, 1\]"):
            venv.step({"d_0": np.zeros(2)})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_turn_taking_agents_are_masked(mode: str) -> None:
    with VectorParallelEnv([TurnEnv] * 2, mode=mode) as venv:
        obs, infos = venv.reset(seed=3)
        for step in range(1, 8):
            t = (step - 1) % 5  # steps already taken in the episode
            acting, waiting = ("p_0", "p_1") if t % 2 == 0 else ("p_1", "p_0")
            assert infos["active"][acting].all() and infos["agent_mask"][acting].all()
            assert not infos["active"][waiting].any() and not infos["agent_mask"][waiting].any()
            assert np.isnan(obs[waiting]).all() and not np.isnan(obs[acting]).any()
            obs, rew, term, trunc, infos = venv.step({"p_0": np.full(2, 1), "p_1": np.full(2, 3)})
            assert (rew[acting] == 1.0).all() and (rew[waiting] == 0.0).all()
            assert not term[waiting].any()  # waiting is not dead
            assert (trunc["p_0"] == (t + 1 == 5)).all()
            ended = t + 1 == 5  # the last step: both players observed, then autoreset
            assert (infos["_final_obs"] == ended).all()
            if ended:
                assert not np.isnan(infos["final_obs"][waiting]).any()
                np.testing.assert_array_equal(infos["final_obs"]["p_0"][:, 1], 5)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("style", ["eda", "legacy"])
def test_env_defined_actions_replace_the_policy_actions(style: str, continuous: bool) -> None:
    fn = partial(TurnEnv, style=style, continuous=continuous)
    with VectorParallelEnv([fn] * 3, mode="sync") as venv:
        obs, infos = venv.reset()
        noop = fn().noop
        for step in range(4):
            acting, waiting = ("p_0", "p_1") if step % 2 == 0 else ("p_1", "p_0")
            assert infos["active"][waiting].all()  # observed, but its action is the env's
            assert infos["agent_mask"][acting].all() and not infos["agent_mask"][waiting].any()
            assert np.isnan(infos["env_defined_actions"][acting]).all()
            shape = venv.single_action_space(waiting).shape
            expected = np.broadcast_to(noop.reshape(shape), (3, *shape))
            np.testing.assert_array_equal(infos["env_defined_actions"][waiting], expected)
            if continuous:
                actions = {a: np.full((3, 2), 0.5, np.float32) for a in venv.agents}
            else:
                actions = {a: np.full(3, 1) for a in venv.agents}
            taken = apply_env_defined_actions(actions, infos)
            obs, _, _, _, infos = venv.step(actions)
            # obs[..., 3] is the first action component each player's env received
            np.testing.assert_allclose(obs[acting][:, 3], 0.5 if continuous else 1)
            np.testing.assert_allclose(obs[waiting][:, 3], noop.reshape(-1)[0])
            np.testing.assert_array_equal(taken[waiting], expected.astype(taken[waiting].dtype))
            np.testing.assert_array_equal(taken[acting], actions[acting])
