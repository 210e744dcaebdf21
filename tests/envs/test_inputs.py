"""Bad actions, non-finite env outputs, seeding and argument checks."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from distmarl.envs import EnvFactory, NonFiniteError, VectorParallelEnv
from tests.envs.toy_envs import DyingEnv, NonFiniteEnv, TurnEnv


@pytest.fixture
def venv():
    with VectorParallelEnv([partial(DyingEnv, (9, 9))] * 2, mode="sync") as env:
        env.reset()
        yield env


@pytest.mark.parametrize(
    ("actions", "pattern"),
    [
        (
            {"d_0": np.zeros(3), "d_1": np.zeros(2)},
            r"actions\['d_0'\] has shape \(3,\), expected \(2,\)",
        ),
        ({"d_0": np.zeros((2, 1)), "d_1": np.zeros(2)}, r"actions\['d_0'\] has shape \(2, 1\)"),
        ({"d_0": np.zeros(2), "d_1": 0}, r"actions\['d_1'\] has shape \(\), expected \(2,\)"),
        ({"d_0": np.zeros(2)}, "no entry for agent 'd_1'"),
        ({"d_0": np.zeros(2), "d_1": np.zeros(2), "ghost": np.zeros(2)}, "unknown agents"),
    ],
)
def test_bad_actions_raise_a_value_error_naming_agent_and_shapes(venv, actions, pattern) -> None:
    with pytest.raises(ValueError, match=pattern):
        venv.step(actions)
    obs, *_ = venv.step({"d_0": np.ones(2), "d_1": np.ones(2)})  # still usable afterwards
    np.testing.assert_array_equal(obs["d_0"][:, 1], [1, 1])


def test_continuous_actions_need_the_action_shape() -> None:
    with VectorParallelEnv([partial(TurnEnv, continuous=True)] * 3, mode="sync") as venv:
        venv.reset()
        with pytest.raises(ValueError, match=r"'p_0'.*\(3,\), expected \(3, 2\).*Box"):
            venv.step({"p_0": np.zeros(3), "p_1": np.zeros((3, 2))})


def test_step_before_reset_and_bad_arguments_are_refused() -> None:
    with VectorParallelEnv([DyingEnv], mode="sync") as venv:
        with pytest.raises(RuntimeError, match="reset"):
            venv.step({a: np.zeros(1) for a in venv.agents})
        with pytest.raises(ValueError, match="2 seeds for 1 sub-envs"):
            venv.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="mode"):
        VectorParallelEnv([DyingEnv], mode="threads")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nonfinite"):
        VectorParallelEnv([DyingEnv], mode="sync", nonfinite="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_workers"):
        VectorParallelEnv([DyingEnv], mode="async", num_workers=2)
    with pytest.raises(ValueError, match="empty"):
        VectorParallelEnv([], mode="sync")


def step_nonfinite(nonfinite: str, steps: int):
    venv = VectorParallelEnv(
        [partial(DyingEnv, (50, 50)), NonFiniteEnv], mode="sync", nonfinite=nonfinite
    )
    venv.reset()
    out = [venv.step({a: np.zeros(2) for a in venv.agents}) for _ in range(steps)]
    return venv, out


def test_nonfinite_raise_names_subenv_and_agent() -> None:
    venv, _ = step_nonfinite("raise", 1)
    with pytest.raises(NonFiniteError, match=r"sub-env 1 .*observation for agent 'd_1'") as e:
        venv.step({a: np.zeros(2) for a in venv.agents})
    assert (e.value.env_index, e.value.agent) == (1, "d_1")
    with pytest.raises(NonFiniteError, match=r"sub-env 1 .*reward for agent 'd_0'"):
        venv.step({a: np.zeros(2) for a in venv.agents})  # step 3: the inf reward
    venv.close()


def test_nonfinite_drop_marks_rows_inactive_and_counts_them() -> None:
    venv, out = step_nonfinite("drop", 4)
    (_, _, _, _, i1), (o2, _, _, _, i2), (_, r3, _, _, i3), (_, _, _, _, i4) = out
    assert venv.dropped_nonfinite == 2
    assert not i1["nonfinite"]["d_1"].any()
    # step 2: sub-env 1's d_1 observation was NaN -> placeholder, inactive, flagged
    assert i2["nonfinite"]["d_1"].tolist() == [False, True]
    assert i2["active"]["d_1"].tolist() == [True, False]
    assert not i2["agent_mask"]["d_1"][1]
    assert np.isnan(o2["d_1"][1]).all() and not np.isnan(o2["d_1"][0]).any()
    # step 3: sub-env 1's d_0 reward was inf -> 0, inactive, flagged
    assert i3["nonfinite"]["d_0"].tolist() == [False, True]
    assert r3["d_0"].tolist() == [1.0, 0.0] and r3["d_1"].tolist() == [2.0, 2.0]
    assert i3["active"]["d_0"].tolist() == [True, False]
    assert not i4["nonfinite"]["d_0"].any() and i4["active"]["d_0"].all()  # back to normal
    venv.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_seeds_make_runs_reproducible(mode: str) -> None:
    fns = [EnvFactory("mpe2:simple_spread_v3", max_cycles=3)] * 2

    def rollout(seed_in_ctor: bool) -> list[np.ndarray]:
        kwargs = {"seed": 5} if seed_in_ctor else {}
        with VectorParallelEnv(fns, mode=mode, **kwargs) as venv:
            obs, _ = venv.reset() if seed_in_ctor else venv.reset(seed=5)
            seen = [obs["agent_0"]]
            for _ in range(4):  # crosses an autoreset (unseeded: continues the env RNG)
                obs, *_ = venv.step({a: np.ones(2, dtype=np.int64) for a in venv.agents})
                seen.append(obs["agent_0"])
        return seen

    a, b = rollout(True), rollout(False)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0][0], a[0][1])  # sub-envs get different seeds (5, 6)
