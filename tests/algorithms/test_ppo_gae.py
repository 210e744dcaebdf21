"""GAE on a hand-computed fragment with a truncation and a termination in it, on a turn-based
game's fragment (a waiting player's reward credited to its last move), and the learner's
bootstrap from the true next observation."""

from __future__ import annotations

import pytest
import torch

from distmarl.algorithms.onpolicy.fragment import clean_fragment
from distmarl.algorithms.onpolicy.gae import gae
from tests.algorithms.ppo_helpers import AGENTS, fragment, make

GAMMA, LAMBDA = 0.9, 0.8  # gamma * lambda = 0.72


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values).reshape(-1, 1)


def test_gae_by_hand_with_a_truncation_and_a_termination() -> None:
    # sub-env 0: rows 0..4; truncated at row 1 (time limit), terminated at row 2, row 4 ends
    # the fragment. sub-env 1: one running episode, rewards 1, values 0.
    reward = torch.cat([column(1, 2, 3, 4, 5), torch.ones(5, 1)], dim=1)
    value = torch.cat([column(0.5, 1, 1.5, 2, 2.5), torch.zeros(5, 1)], dim=1)
    v_next_obs = torch.cat([column(10, 20, 30, 40, 50), torch.zeros(5, 1)], dim=1)
    terminated = torch.cat([column(0, 0, 1, 0, 0), torch.zeros(5, 1)], dim=1)
    truncated = torch.cat([column(0, 1, 0, 0, 0), torch.zeros(5, 1)], dim=1)

    # inside an episode it bootstraps from V(obs_{t+1}) as recorded; after an end and at the
    # fragment's end from the value of the true next observation
    adv, ret = gae(reward, value, v_next_obs, terminated, truncated, GAMMA, LAMBDA)
    # deltas, sub-env 0:
    #   d0 = 1 + 0.9 * 1    - 0.5 = 1.4
    #   d1 = 2 + 0.9 * 20   - 1   = 19     (truncated: bootstraps from the final obs)
    #   d2 = 3 + 0          - 1.5 = 1.5    (terminated: no bootstrap)
    #   d3 = 4 + 0.9 * 2.5  - 2   = 4.25
    #   d4 = 5 + 0.9 * 50   - 2.5 = 47.5   (fragment end: bootstraps)
    # advantages: A4 = 47.5; A3 = 4.25 + 0.72 * 47.5 = 38.45; A2 = 1.5 (episode ended);
    #   A1 = 19 (episode ended); A0 = 1.4 + 0.72 * 19 = 15.08
    expected0 = [15.08, 19.0, 1.5, 38.45, 47.5]
    # sub-env 1: every delta is 1; A_t = 1 + 0.72 * A_{t+1}
    expected1 = [2.88038656, 2.611648, 2.2384, 1.72, 1.0]
    assert adv[:, 0].tolist() == pytest.approx(expected0, abs=1e-5)
    assert adv[:, 1].tolist() == pytest.approx(expected1, abs=1e-6)
    assert ret[:, 0].tolist() == pytest.approx([15.58, 20.0, 3.0, 40.45, 50.0], abs=1e-5)
    assert torch.equal(ret[:, 1], adv[:, 1])


def test_a_waiting_players_rewards_go_to_its_last_move_and_its_next_move_bootstraps() -> None:
    # one sub-env, 6 rows; the player moves at rows 0, 2 and 4, waits at 1, 3 and 5. The
    # first episode ends at row 3 (the opponent wins: -1 arrives while the player waits), the
    # second runs past the fragment's end.
    reward = column(0.1, 0.2, 0.3, -1.0, 0.5, 0.25)
    value = column(1.0, 9.0, 2.0, 9.0, 3.0, 9.0)  # 9: not read (waiting rows)
    v_next_obs = column(7.0, 7.0, 7.0, 7.0, 7.0, 4.0)
    terminated = column(0, 0, 0, 1, 0, 0)
    active = column(1, 0, 1, 0, 1, 0).bool()
    adv, target = gae(reward, value, v_next_obs, terminated, torch.zeros(6, 1), 1.0, 1.0,
                      active)
    # row 4: 0.5 + 0.25 (received waiting) + V(obs after the fragment) 4 - 3 = 1.75
    # row 2: 0.3 + (-1) (the loss) + nothing (terminated) - 2 = -2.7
    # row 0: 0.1 + 0.2 + V(row 2) 2 - 1 = 1.3, + A2 -2.7 = -1.4
    assert adv[:, 0].tolist() == pytest.approx([-1.4, 0.0, -2.7, 0.0, 1.75, 0.0])
    assert target[:, 0].tolist() == pytest.approx([-0.4, 0.0, -0.7, 0.0, 4.75, 0.0])
    # every row active: the usual GAE (row t + 1 bootstraps row t)
    every, _ = gae(reward, value, v_next_obs, terminated, torch.zeros(6, 1), 1.0, 1.0)
    assert every[5, 0].item() == pytest.approx(0.25 + 4.0 - 9.0)
    assert every[2, 0].item() == pytest.approx(0.3 + 9.0 - 2.0 + every[3, 0].item())


def test_learner_bootstraps_from_the_recorded_value_of_the_true_next_observation() -> None:
    algo = make("MAPPO", "mixed", seed=3, gamma=0.9, gae_lambda=0.8)
    batch = fragment(algo, t=10, e=2, seed=1)  # ends at rows 4 and 9: env 0 truncated, 1 terminated
    heads = {a: algo.heads[algo.group_of[a]] for a in AGENTS}
    frag = clean_fragment(batch, algo.readers, heads, algo.device)
    adv, target = algo._advantages(frag)
    a = "agent_1"
    f = frag[a]
    v_next = f.next_value  # the behaviour value network's estimate, recorded when it acted
    assert torch.equal(v_next, torch.as_tensor(batch["next_value"][a]))
    want, want_target = gae(f.reward, f.value, v_next, f.terminated, f.truncated, 0.9, 0.8,
                            f.active)
    assert torch.allclose(adv[a], want) and torch.allclose(target[a], want_target)
    # row 4 of sub-env 0 is a truncation: its delta uses V(final obs), not V(obs[5])
    d4 = f.reward[4, 0] + 0.9 * v_next[4, 0] - f.value[4, 0]
    assert adv[a][4, 0].item() == pytest.approx(d4.item(), abs=1e-5)
    # row 4 of sub-env 1 is a termination: no bootstrap at all
    assert adv[a][4, 1].item() == pytest.approx((f.reward[4, 1] - f.value[4, 1]).item(), abs=1e-5)
