"""Env specs: resolution, kwargs, AEC conversion and the errors for every kind of bad spec."""

from __future__ import annotations

import pickle
import sys

import pytest
from pettingzoo.utils.env import ParallelEnv

from distmarl.envs import (
    EnvFactory,
    EnvSpecError,
    MissingPackageError,
    make_env,
    make_vector_env,
    to_parallel,
)
from distmarl.envs.renamed import env_names


def episode_length(env: ParallelEnv, seed: int = 0) -> int:
    env.reset(seed=seed)
    steps = 0
    while env.agents:
        env.step({a: env.action_space(a).sample() for a in env.agents})
        steps += 1
    return steps


@pytest.mark.parametrize(
    "spec",
    ["mpe2:simple_spread_v3", "mpe2.simple_spread_v3", "mpe2.simple_spread_v3:parallel_env"],
)
def test_specs_name_an_env_and_kwargs_pass_through(spec: str) -> None:
    env = make_env(spec, max_cycles=3, continuous_actions=True)
    assert isinstance(env, ParallelEnv)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert env.action_space("agent_0").shape == (5,)  # continuous_actions=True reached the env
    assert episode_length(env) == 3  # max_cycles=3 reached the env


def test_a_parallelizable_aec_env_is_converted() -> None:
    env = make_env("mpe2.simple_speaker_listener_v4:env", max_cycles=4)
    assert isinstance(env, ParallelEnv)
    assert episode_length(env) == 4


def test_a_turn_based_aec_env_is_converted() -> None:
    env = make_env("pettingzoo.classic:tictactoe_v3")
    assert isinstance(env, ParallelEnv)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"player_1", "player_2"}


def test_a_callable_spec_is_called_with_the_kwargs() -> None:
    env = make_env("tests.envs.toy_envs:DyingEnv", deaths=(2, 2))
    assert env.possible_agents == ["d_0", "d_1"]
    assert episode_length(env) == 2


def test_env_factory_pickles_and_builds() -> None:
    factory = pickle.loads(pickle.dumps(EnvFactory("mpe2:simple_spread_v3", max_cycles=2)))
    assert episode_length(factory()) == 2
    assert "max_cycles=2" in repr(factory)


@pytest.mark.parametrize(
    ("spec", "error", "pattern"),
    [
        ("no_such_pkg_xyz:env", EnvSpecError, "no module named 'no_such_pkg_xyz'"),
        ("mpe2:simple_sprad_v3", EnvSpecError, "has no 'simple_sprad_v3'.*'simple_spread_v3'"),
        ("pettingzoo.mpe:simple_spread_v3", MissingPackageError,
         "moved to the 'mpe2' package: use 'mpe2:simple_spread_v3'"),
        ("pettingzoo.atari:pong_v3", MissingPackageError, r"pip install 'pettingzoo\[atari\]'"),
        # an old version: the current one is named (v4 up to pettingzoo 1.26, the bench
        # extra's pin for AgileRL; v5 from 1.27)
        ("pettingzoo.sisl:pursuit_v3", EnvSpecError,
         r"^env spec 'pettingzoo.sisl:pursuit_v3': 'pursuit_v3' is an old version that "
         r"pettingzoo [0-9.]+ no longer has: use 'pettingzoo.sisl:pursuit_v[45]'"),
        ("builtins:dict", EnvSpecError, "neither a PettingZoo ParallelEnv nor an AECEnv"),
        ("math:pi", EnvSpecError, "'pi' is a float, not callable"),
        ("mpe2._mpe_utils", EnvSpecError, "has neither parallel_env nor env"),
        (":", EnvSpecError, "must be 'package.module:attr'"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        make_env(spec)


def test_a_missing_dependency_of_a_module_names_it_and_the_pip_command() -> None:
    # pettingzoo.atari imports fine; its env modules need multi_agent_ale_py, not installed here
    with pytest.raises(MissingPackageError, match="needs 'multi_agent_ale_py'"):
        make_env("pettingzoo.atari.pong_v3")


def test_to_parallel_rejects_other_objects() -> None:
    with pytest.raises(EnvSpecError, match="produced object"):
        to_parallel(object())


def test_make_vector_env_checks_the_spec_first() -> None:
    with pytest.raises(EnvSpecError, match="simple_spread_v3"):
        make_vector_env("mpe2:simple_spred_v3", 4, mode="async")
    venv = make_vector_env("mpe2:simple_spread_v3", 2, mode="sync", max_cycles=2)
    obs, _ = venv.reset(seed=0)
    assert obs["agent_0"].shape == (2, 18)
    venv.close()


def test_a_missing_env_package_gives_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpe2", None)  # import mpe2 now fails as if not installed
    with pytest.raises(
        MissingPackageError, match="needs 'mpe2', which is not installed: pip install mpe2"
    ):
        make_env("mpe2:simple_spread_v3")


@pytest.mark.parametrize(
    ("spec", "successor"),
    [
        ("pettingzoo.butterfly:pistonball_v5", "use 'pettingzoo.butterfly:pistonball_v6'"),
        ("pettingzoo.butterfly.pistonball_v5", "use 'pettingzoo.butterfly:pistonball_v6'"),
        # a version newer than the installed one: the installed one is named
        ("pettingzoo.sisl:multiwalker_v99", "has 'multiwalker_v9', another version of the "
                                            "same env: use 'pettingzoo.sisl:multiwalker_v9'"),
        ("mpe2:simple_speaker_listener_v3", "use 'mpe2:simple_speaker_listener_v4'"),
        ("pettingzoo.mpe:simple_speaker_listener_v3",
         "pettingzoo.mpe has moved to the 'mpe2' package: use 'mpe2:simple_speaker_listener_v4'"),
        ("pettingzoo.mpe.simple_spread_v3",
         "pettingzoo.mpe has moved to the 'mpe2' package: use 'mpe2:simple_spread_v3'"),
    ],
)
def test_renamed_envs_name_their_successor(spec: str, successor: str) -> None:
    with pytest.raises((EnvSpecError, MissingPackageError)) as err:
        make_env(spec)
    assert str(err.value).startswith(f"env spec '{spec}': "), str(err.value)
    assert successor in str(err.value), str(err.value)
    assert str(err.value).count("env spec") == 1


def test_a_removed_env_says_no_version_is_left_and_lists_the_family() -> None:
    import pettingzoo.sisl

    if "waterworld_v4" in env_names(pettingzoo.sisl):
        pytest.skip("this pettingzoo still has waterworld")
    with pytest.raises(EnvSpecError) as err:
        make_env("pettingzoo.sisl:waterworld_v4")
    message = str(err.value)
    assert "has no 'waterworld_v4' and no other version of 'waterworld'" in message
    assert "an older release may have it" in message and "pursuit_v" in message


def test_a_moved_env_without_its_new_package_gives_the_pip_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpe2", None)  # import mpe2 now fails as if not installed
    with pytest.raises(MissingPackageError, match=r"pip install mpe2, then use "
                       r"'mpe2:simple_tag_v3' \(or the version mpe2 has\)"):
        make_env("pettingzoo.mpe:simple_tag_v3")


def test_magent_envs_point_to_magent2() -> None:
    pytest.importorskip("magent2")
    with pytest.raises(MissingPackageError, match=r"use 'magent2\.environments:battle_v4'"):
        make_env("pettingzoo.magent:battle_v3")
