"""``lighten``: which stacks get the lighter parallel view, and its action checks. (That it steps
exactly like PettingZoo's stack: tests/envs/test_equivalence.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from mpe2 import simple_speaker_listener_v4, simple_spread_v3
from pettingzoo.utils.conversions import aec_to_parallel
from pettingzoo.utils.wrappers import BaseWrapper

from distmarl.envs import make_env
from distmarl.envs.light import LightParallel, lighten


class Unknown(BaseWrapper):
    """A wrapper the light view knows nothing about."""


def test_the_standard_mpe2_stacks_are_lightened_and_others_kept() -> None:
    for continuous in (True, False):
        env = make_env("mpe2:simple_spread_v3", continuous_actions=continuous)
        assert isinstance(env, LightParallel) and env.clip is continuous
        assert env.check is not continuous
    plain = make_env("mpe2:simple_spread_v3", light=False)
    assert not isinstance(plain, LightParallel)
    odd = aec_to_parallel(Unknown(simple_spread_v3.env()))
    assert lighten(odd) is odd
    turns = make_env("pettingzoo.classic:tictactoe_v3")
    assert lighten(turns) is turns  # turn-based conversion: not aec_to_parallel


def test_state_spaces_and_reset_match_pettingzoo() -> None:
    light = make_env("mpe2:simple_speaker_listener_v4", continuous_actions=True)
    ref = simple_speaker_listener_v4.parallel_env(continuous_actions=True)
    obs, infos = light.reset(seed=3)
    ref_obs, ref_infos = ref.reset(seed=3)
    assert light.possible_agents == ref.possible_agents and light.agents == ref.agents
    for a in ref.possible_agents:
        np.testing.assert_array_equal(obs[a], ref_obs[a])
        assert light.observation_space(a) == ref.observation_space(a)
        assert light.action_space(a) == ref.action_space(a)
    assert infos == ref_infos and light.state_space == ref.state_space
    np.testing.assert_array_equal(light.state(), ref.state())
    assert light.unwrapped is light.raw.unwrapped
    light.close()
    ref.close()


def test_bad_actions_are_refused_by_agent() -> None:
    env = make_env("mpe2:simple_speaker_listener_v4", continuous_actions=True)
    env.reset(seed=0)
    good = {"speaker_0": np.zeros(3, np.float32), "listener_0": np.zeros(5, np.float32)}
    with pytest.raises(ValueError, match="action of 'speaker_0' is NaN"):
        env.step({**good, "speaker_0": np.full(3, np.nan, np.float32)})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"'listener_0' has shape \(4,\), its space \(5,\)"):
        env.step({**good, "listener_0": np.zeros(4, np.float32)})
    discrete = make_env("mpe2:simple_speaker_listener_v4")
    discrete.reset(seed=0)
    with pytest.raises(ValueError, match="action 7 of 'speaker_0' is outside its space"):
        discrete.step({"speaker_0": 7, "listener_0": 0})
