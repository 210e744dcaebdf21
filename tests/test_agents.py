"""Agent groups: the one suffix rule, groups in order, and the shared-space check."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from distmarl.agents import agent_groups, group_of, resolve_sides, shared_groups
from distmarl.envs import VectorParallelEnv, make_env
from tests.envs.toy_envs import mixed_group_env


@pytest.mark.parametrize(
    ("agent", "group"),
    [
        ("bob_1", "bob"),
        ("speaker_0", "speaker"),
        ("red_team_12", "red_team"),
        ("bob_007", "bob"),
        ("bob_1_2", "bob_1"),
        ("bob__0", "bob_"),
        ("referee", "referee"),
        ("bob_x", "bob_x"),
        ("bob_1x", "bob_1x"),
        ("bob_", "bob_"),
        ("_3", "_3"),
        ("3", "3"),
        ("bob_\u00b2", "bob_\u00b2"),  # a superscript two is not an ASCII digit
        ("bob_\u0663", "bob_\u0663"),  # nor is an Arabic-Indic three
        ("bob_1\n", "bob_1\n"),  # the suffix ends the name
        ("", ""),
    ],
)
def test_group_of(agent: str, group: str) -> None:
    assert group_of(agent) == group


def test_agent_groups_keep_first_appearance_and_agent_order() -> None:
    agents = ["fred_1", "bob_0", "referee", "fred_0", "bob_1"]
    assert agent_groups(agents) == {"fred": ["fred_1", "fred_0"], "bob": ["bob_0", "bob_1"],
                                    "referee": ["referee"]}
    assert list(agent_groups(agents)) == ["fred", "bob", "referee"]
    assert agent_groups([]) == {}


def _spaces(env: object) -> tuple[list[str], dict[str, spaces.Space], dict[str, spaces.Space]]:
    agents = list(env.possible_agents)  # type: ignore[attr-defined]
    return (agents, {a: env.observation_space(a) for a in agents},  # type: ignore[attr-defined]
            {a: env.action_space(a) for a in agents})  # type: ignore[attr-defined]


def test_groups_of_an_env_with_shared_spaces() -> None:
    env = make_env("mpe2:simple_tag_v3", num_good=1, num_adversaries=3)
    agents, obs, act = _spaces(env)
    groups = shared_groups(agents, obs, act)
    assert groups == {"adversary": ["adversary_0", "adversary_1", "adversary_2"],
                      "agent": ["agent_0"]}
    assert obs["adversary_2"].shape == (16,) and act["adversary_2"].n == 5
    assert obs["agent_0"].shape == (14,)


def test_groups_of_a_vector_env() -> None:
    with VectorParallelEnv(
        [lambda: make_env("mpe2:simple_speaker_listener_v4")], mode="sync"
    ) as venv:
        agents = list(venv.possible_agents)
        groups = shared_groups(agents, {a: venv.single_observation_space(a) for a in agents},
                               {a: venv.single_action_space(a) for a in agents})
    assert groups == {"speaker": ["speaker_0"], "listener": ["listener_0"]}


def test_agents_of_one_group_with_different_spaces_are_refused() -> None:
    agents, obs, act = _spaces(mixed_group_env())
    with pytest.raises(ValueError, match=r"group 'd': observation space of 'd_1'.*differs"):
        shared_groups(agents, obs, act)


def test_different_action_spaces_are_refused_naming_both_agents() -> None:
    box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    with pytest.raises(ValueError, match=r"group 'b': action space of 'b_1' .*that of 'b_0'"):
        shared_groups(["b_0", "b_1"], {"b_0": box, "b_1": box},
                      {"b_0": spaces.Discrete(4), "b_1": spaces.Discrete(5)})


def _env_spaces(spec: str) -> tuple[list[str], dict, dict]:
    return _spaces(make_env(spec))


def test_sides_of_a_mixed_game_by_group_and_seats_of_a_symmetric_one() -> None:
    tag = _env_spaces("mpe2:simple_tag_v3")
    sides = resolve_sides(*tag, {"predators": ["adversary"], "prey": ["agent"]})
    assert sides is not None and not sides.symmetric
    assert sides.agents == {"predators": ["adversary_0", "adversary_1", "adversary_2"],
                            "prey": ["agent_0"]}
    assert sides.side_of("adversary_1") == "predators"
    assert resolve_sides(*tag, None) is None and resolve_sides(*tag, {}) is None  # cooperative
    c4 = _env_spaces("pettingzoo.classic:connect_four_v3")
    seats = resolve_sides(*c4, None, symmetric=True)
    assert seats is not None and seats.symmetric
    assert seats.agents == {"player_0": ["player_0"], "player_1": ["player_1"]}


@pytest.mark.parametrize(("sides", "symmetric", "message"), [
    ({"predators": ["adversary"], "prey": ["agents"]}, False,
     r"league.sides.prey: no agent of this env is in group 'agents' \(groups: \['adversary', "
     r"'agent'\]\)"),
    ({"predators": ["adversary"], "prey": ["agent", "adversary"]}, False,
     r"group 'adversary' is in two sides, 'predators' and 'prey'"),
    ({"predators": ["adversary"]}, False, r"the agents of group\(s\) \['agent'\] play for no side"),
    ({"predators": [], "prey": ["agent"]}, False, r"league.sides.predators names no agent group"),
    ({"all": ["adversary", "agent"]}, False, r"needs two sides or more"),
    ({"predators": ["adversary"], "prey": ["agent"]}, True, r"either sides or symmetric"),
    (None, True, r"league.symmetric: true, but the observation space of 'agent_0' \(Box.*\) "
                 r"differs from that of 'adversary_0'.*name the sides instead"),
])
def test_bad_sides_name_the_field_and_what_is_wrong(sides, symmetric: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_sides(*_env_spaces("mpe2:simple_tag_v3"), sides, symmetric)
