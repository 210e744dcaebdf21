"""Generalised advantage estimation (Schulman et al. 2016, https://arxiv.org/abs/1506.02438)
over a time-major rollout fragment, with terminations and truncations kept apart.

Every tensor is ``(T, E)``: ``T`` vectorised steps of ``E`` sub-envs, row ``t`` being the
transition ``(obs_t, action_t) -> (reward_t, next_obs_t)``. An episode ends at row ``t`` where
``terminated_t | truncated_t`` (the sub-env was reset in the same step, so row ``t + 1`` starts a
new episode):

- termination: the episode really ended, so nothing is bootstrapped: ``delta_t = r_t - V(s_t)``;
- truncation (time limit) and the fragment's last row: the episode goes on beyond what we saw, so
  ``delta_t = r_t + gamma * V(next_obs_t) - V(s_t)`` with the *true* next observation (the final
  one, not the reset one) -- SB3's and CleanRL's timeout handling, see
  https://github.com/DLR-RM/stable-baselines3/issues/633;
- in both cases the lambda-recursion stops at row ``t``.

Rows where the agent is **inactive** (a player waiting for its turn, a seat held by a league
opponent, an agent whose action the env chose) are skipped: the agent's own timeline is its
active rows. Rewards it receives while inactive (a turn-based game's loss arrives on the
winner's move) are credited to its last active row of the same episode, which bootstraps
from ``V`` at its next active row (one discount step per own move, as in PettingZoo's AEC
``last()``), or from the episode's end. A placeholder row cannot leak into an advantage.
"""

from __future__ import annotations

import torch


def gae(reward: torch.Tensor, value: torch.Tensor, value_of_next_obs: torch.Tensor,
        terminated: torch.Tensor, truncated: torch.Tensor, gamma: float, gae_lambda: float,
        active: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets (``advantage + value``), both ``(T, E)``, 0 and ``value``
    on inactive rows.

    ``reward``: float ``(T, E)``, as the env gave it on inactive rows too (NaN-free);
    ``value``: ``V(s_t)``; ``value_of_next_obs``: ``V`` of the true next observation of every
    row (read where an episode ended and at the fragment's last row); ``terminated``,
    ``truncated``: 0/1 or bool ``(T, E)`` on every row; ``active``: bool ``(T, E)``, None
    meaning always.
    """
    term = terminated.float()
    ended = (terminated > 0) | (truncated > 0)
    active = torch.ones_like(ended) if active is None else active.bool()
    advantage = torch.zeros_like(reward)
    zeros = torch.zeros_like(reward[0])
    running, carry, pending = zeros, zeros, zeros
    boot = value_of_next_obs[-1]  # the fragment ends: the episode goes on beyond it
    for t in range(reward.shape[0] - 1, -1, -1):
        # an episode ending at row t: nothing after it is this episode's
        boot = torch.where(ended[t], (1.0 - term[t]) * value_of_next_obs[t], boot)
        carry = torch.where(ended[t], zeros, carry)
        pending = torch.where(ended[t], zeros, pending)
        here = reward[t] + pending + gamma * boot - value[t] \
            + gamma * gae_lambda * carry * running
        act = active[t]
        advantage[t] = torch.where(act, here, zeros)
        running = torch.where(act, here, running)
        boot = torch.where(act, value[t], boot)
        carry = torch.where(act, torch.ones_like(carry), carry)
        pending = torch.where(act, zeros, pending + reward[t])
    return advantage, advantage + torch.where(active, value, zeros)
