"""SuperSuit's observation wrappers applied straight to the parallel env: the same episode as
SuperSuit's own parallel -> AEC -> parallel stack, each observation transformed once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distmarl.envs import make_env, parse_wrappers
from distmarl.envs.parallel_obs import ParallelObservationLambda, direct

supersuit = pytest.importorskip("supersuit")
pytest.importorskip("pymunk")
from pettingzoo.butterfly import pistonball_v6  # noqa: E402
from pettingzoo.utils.conversions import aec_to_parallel_wrapper  # noqa: E402

FRAMES = [{"color_reduction": {"mode": "B"}}, {"resize": {"x_size": 16, "y_size": 12}},
          {"frame_stack": 2}]


def _chain(env: Any) -> list[type]:
    kinds = []
    while env is not None:
        kinds.append(type(env))
        env = env.__dict__.get("env") or env.__dict__.get("aec_env")
    return kinds


def _by_hand() -> Any:
    env = pistonball_v6.parallel_env(n_pistons=5, max_cycles=12, continuous=False)
    return supersuit.frame_stack_v1(supersuit.resize_v1(supersuit.color_reduction_v0(
        env, mode="B"), 16, 12), 2)


@pytest.mark.parametrize("light", [True, False])
def test_same_episodes_as_supersuits_stack_without_the_aec_round_trip(light: bool) -> None:
    env = make_env("pettingzoo.butterfly:pistonball_v6", light=light,
                   wrappers=parse_wrappers(FRAMES), n_pistons=5, max_cycles=12, continuous=False)
    kinds = _chain(env)
    # over PettingZoo's own stack (light=False) SuperSuit unwraps it and wraps the AEC env
    assert kinds.count(ParallelObservationLambda) == (2 if light else 0)
    assert (aec_to_parallel_wrapper in kinds) is not light
    ref = _by_hand()
    assert all(env.observation_space(a) == ref.observation_space(a) for a in ref.possible_agents)
    rng = np.random.default_rng(0)
    lengths = []
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        want, _ = ref.reset(seed=episode)
        steps = 0
        while ref.agents:
            assert sorted(obs) == sorted(want)
            assert all(np.array_equal(obs[a], want[a]) and obs[a].dtype == np.uint8 for a in want)
            actions = {a: int(rng.integers(3)) for a in ref.agents}
            obs, rew, term, trunc, _ = env.step(actions)
            want, want_rew, want_term, want_trunc, _ = ref.step(actions)
            assert (rew, term, trunc) == (want_rew, want_term, want_trunc)
            steps += 1
        lengths.append(steps)
        assert not env.agents
    assert lengths == [12, 12, 12]  # both stacks truncate at max_cycles together


def test_other_stacks_are_returned_unchanged() -> None:
    env = pistonball_v6.parallel_env(n_pistons=3, max_cycles=12)
    stacked = supersuit.frame_stack_v1(env, 2)
    assert direct(env) is env and direct(stacked) is stacked
    clipped = supersuit.clip_reward_v0(env)  # a reward lambda: also an AEC round trip, kept
    assert direct(clipped) is clipped
