"""The vector env equals N single mpe2 envs stepped with the same seeds and actions.

Sub-envs get different ``max_cycles`` so episodes end (and autoreset) at different steps; the
final observations must be the single envs' last observations, never their reset ones. The
vector env steps mpe2 through :class:`~distmarl.envs.light.LightParallel`; the single envs are
PettingZoo's own stack (``light=False``), so this also checks that the two step alike, with
continuous actions partly out of bounds (clipped by both).
"""

from __future__ import annotations

import numpy as np
import pytest

from distmarl.envs import EnvFactory, VectorParallelEnv, true_next_obs
from distmarl.envs.light import LightParallel

CYCLES = (3, 4, 6)  # max_cycles of the three sub-envs
STEPS = 13
SEED = 11


def random_actions(venv: VectorParallelEnv, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for a in venv.agents:
        space = venv.single_action_space(a)
        if hasattr(space, "n"):
            out[a] = rng.integers(0, space.n, size=venv.num_envs)
        else:
            shape = (venv.num_envs, *space.shape)
            out[a] = rng.uniform(space.low - 0.3, space.high + 0.3, size=shape).astype(space.dtype)
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("name", ["simple_speaker_listener_v4", "simple_spread_v3"])
def test_vector_env_equals_single_envs(name: str, continuous: bool, mode: str) -> None:
    fns = [EnvFactory(f"mpe2:{name}", max_cycles=c, continuous_actions=continuous) for c in CYCLES]
    singles = [EnvFactory(f"mpe2:{name}", max_cycles=c, continuous_actions=continuous,
                          light=False)() for c in CYCLES]
    assert not isinstance(singles[0], LightParallel)
    rng = np.random.default_rng(0)
    endings = 0
    with VectorParallelEnv(fns, mode=mode, num_workers=2 if mode == "async" else None) as venv:
        if mode == "sync":
            assert isinstance(venv.backend.runner.envs[0].env, LightParallel)  # in StepLimit
        obs, infos = venv.reset(seed=SEED)
        for i, env in enumerate(singles):
            ref, _ = env.reset(seed=SEED + i)
            for a in venv.agents:
                np.testing.assert_array_equal(obs[a][i], ref[a])
        assert not infos["_final_obs"].any()
        for _ in range(STEPS):
            actions = random_actions(venv, rng)
            obs, rew, term, trunc, infos = venv.step(actions)
            nxt = true_next_obs(obs, infos)
            for i, env in enumerate(singles):
                o, r, te, tr, _ = env.step({a: actions[a][i] for a in env.agents})
                ended = not env.agents
                assert infos["_final_obs"][i] == ended
                for a in venv.agents:
                    assert rew[a][i] == r[a]
                    assert term[a][i] == te[a] and trunc[a][i] == tr[a]
                    np.testing.assert_array_equal(nxt[a][i], o[a])  # the true next obs
                    assert infos["active"][a][i]
                if ended:
                    endings += 1
                    for a in venv.agents:
                        np.testing.assert_array_equal(infos["final_obs"][a][i], o[a])
                    o, _ = env.reset()  # the reset obs is not the final one
                    assert any(not np.array_equal(o[a], nxt[a][i]) for a in venv.agents)
                for a in venv.agents:
                    np.testing.assert_array_equal(obs[a][i], o[a])
    # 13 steps over max_cycles 3, 4, 6: 4 + 3 + 2 episode ends, all by truncation
    assert endings == 9
    for env in singles:
        env.close()
