"""The hand-written spread controllers of ``benchmarks.learning.spread_reference``: each agent
finds, from its own observation, the same landmark assignment as one computed from the world's
positions, and the controllers score as a coordinated / uncoordinated policy should."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from mpe2 import simple_spread_v3

from benchmarks.learning import spread_reference as ref

ROOT = Path(__file__).resolve().parents[1]


def _world_assignment(env) -> dict[str, int]:
    """Least-total-distance assignment from the world's absolute positions."""
    world = env.unwrapped.world
    agents = np.array([a.state.p_pos for a in world.agents])
    landmarks = np.array([lm.state.p_pos for lm in world.landmarks])
    dist = np.linalg.norm(agents[:, None] - landmarks[None], axis=-1)
    best = min(itertools.permutations(range(len(landmarks))),
               key=lambda p: float(dist[np.arange(len(agents)), list(p)].sum()))
    return {a.name: int(best[i]) for i, a in enumerate(world.agents)}


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_each_agent_finds_the_worlds_assignment_from_its_own_observation(seed: int) -> None:
    env = simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=25)
    obs, _ = env.reset(seed=seed)
    picks = {}
    for agent, o in obs.items():
        _, landmarks, others = ref.spread_parts(o[None].astype(np.float64))
        picks[agent] = ref.matched_landmark(landmarks[0], others[0])
    assert picks == _world_assignment(env)
    assert sorted(picks.values()) == [0, 1, 2]  # every landmark taken once


def test_pd_action_pushes_towards_the_target_in_mpe2s_action_layout() -> None:
    # mpe2 applies u_x = a[2] - a[1], u_y = a[4] - a[3]; a target up-left of a still agent
    a = ref.pd_action(np.array([[-0.1, 0.2]]), np.zeros((1, 2)), kp=1.0, kd=0.0)
    np.testing.assert_allclose(a, [[0.0, 0.1, 0.0, 0.0, 0.2]], atol=1e-7)
    # moving fast towards +x past the target: the damping term brakes (pushes -x)
    b = ref.pd_action(np.array([[0.0, 0.0]]), np.array([[0.5, 0.0]]), kp=1.0, kd=1.0)
    np.testing.assert_allclose(b, [[0.0, 0.5, 0.0, 0.0, 0.0]], atol=1e-7)


def test_matched_controller_scores_far_above_greedy_on_the_benchmark_episodes() -> None:
    scores = ref.reference_scores(episodes=16)
    greedy, matched = scores["greedy"]["mean"], scores["matched"]["mean"]
    assert scores["matched"]["episodes"] == 16
    # on 1000 episodes: greedy -53.4, matched -23.3 (random play -76.1)
    assert -35.0 < matched < -15.0
    assert matched > greedy + 15.0


def test_bad_input_is_refused_with_the_value_named() -> None:
    with pytest.raises(ValueError, match="width 10 is not 6"):
        ref.spread_parts(np.zeros((1, 10)))
    with pytest.raises(ValueError, match="'nearest'"):
        ref.SpreadController("nearest")
    with pytest.raises(ValueError, match="simple_speaker_listener_v4"):
        ref.reference_scores(ROOT / "examples" / "configs" / "speaker_listener_maddpg.yaml",
                             episodes=1)


def test_end_profile_tells_coordinated_from_uncoordinated_policies() -> None:
    matched = ref.end_profile(ref.SpreadController("matched"), episodes=20)
    greedy = ref.end_profile(ref.SpreadController("greedy"), episodes=20)
    # 200 episodes: matched covers 2.94 of 3 landmarks, each agent on its own one; greedy 1.31,
    # its agents nearest to 2.09 different landmarks
    assert matched["distinct"] == 3.0 and matched["covered"] > 2.5
    assert matched["sum_min_dist"] < 0.1
    assert greedy["distinct"] < 2.5 and greedy["covered"] < 2.0
    assert greedy["sum_min_dist"] > 0.5 and greedy["score"] < matched["score"] - 15.0


def test_saved_members_refuses_a_directory_without_members(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        ref.saved_members(tmp_path)


@pytest.mark.parametrize("flag", ["--episodes", "--profile-episodes"])
def test_the_script_refuses_fewer_than_one_episode_by_flag(flag: str) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "benchmarks.learning.spread_reference",
                           flag, "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"{flag} must be at least 1, got 0" in proc.stderr
