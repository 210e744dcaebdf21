"""Agent groups for parameter sharing."""

from __future__ import annotations

import pytest

from distmarl.envs import VectorParallelEnv, agent_groups, group_of, make_env
from tests.envs.toy_envs import mixed_group_env


@pytest.mark.parametrize(
    ("agent", "group"),
    [
        ("bob_1", "bob"),
        ("speaker_0", "speaker"),
        ("red_team_12", "red_team"),
        ("referee", "referee"),
        ("bob_x", "bob_x"),
        ("_3", "_3"),
    ],
)
def test_group_of(agent: str, group: str) -> None:
    assert group_of(agent) == group


def test_groups_of_an_env_with_their_shared_spaces() -> None:
    groups = agent_groups(make_env("mpe2:simple_tag_v3", num_good=1, num_adversaries=3))
    assert list(groups) == ["adversary", "agent"]
    adv = groups["adversary"]
    assert adv.agents == ("adversary_0", "adversary_1", "adversary_2")
    assert adv.observation_space.shape == (16,) and adv.action_space.n == 5
    assert groups["agent"].agents == ("agent_0",)
    assert groups["agent"].observation_space.shape == (14,)


def test_groups_of_a_vector_env() -> None:
    with VectorParallelEnv(
        [lambda: make_env("mpe2:simple_speaker_listener_v4")], mode="sync"
    ) as venv:
        groups = agent_groups(venv)
    assert {g: grp.agents for g, grp in groups.items()} == {
        "speaker": ("speaker_0",),
        "listener": ("listener_0",),
    }
    assert groups["listener"].observation_space.shape == (11,)


def test_agents_of_one_group_with_different_spaces_are_refused() -> None:
    with pytest.raises(ValueError, match="group 'd': observation space of 'd_1'.*differs"):
        agent_groups(mixed_group_env())
