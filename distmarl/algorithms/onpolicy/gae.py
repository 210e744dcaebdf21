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
- in both cases the lambda-recursion stops at row ``t``; it also stops where the agent is
  inactive at ``t + 1`` (``next_active``), so a placeholder row cannot leak into an advantage.
  An agent inactive mid-episode (turn-taking) thus gets one-step advantages that bootstrap from
  ``V(next_obs)``; rewards it receives while inactive are not credited to its last action.
"""

from __future__ import annotations

import torch


def bootstrap_values(value: torch.Tensor, value_of_next_obs: torch.Tensor,
                     terminated: torch.Tensor, truncated: torch.Tensor,
                     next_active: torch.Tensor | None = None) -> torch.Tensor:
    """``V(next_obs_t)`` for every row ``(T, E)``.

    Inside an episode ``next_obs_t`` is ``obs_{t+1}``, whose value the behaviour policy already
    recorded (``value[t + 1]``); where the episode ended at ``t`` (the next row is a reset one),
    where the agent is inactive at ``t + 1`` (its recorded value there is not one to trust, e.g.
    a player waiting for its turn) and at the fragment's last row, ``value_of_next_obs`` (the
    learner's value net on the true next observation) is used instead. Terminated rows get a
    value too; :func:`gae` ignores it.
    """
    use_next_obs = (terminated > 0) | (truncated > 0)
    if next_active is not None:
        use_next_obs = use_next_obs | ~(next_active > 0)
    following = torch.cat([value[1:], value_of_next_obs[-1:]], dim=0)
    return torch.where(use_next_obs, value_of_next_obs, following)


def gae(reward: torch.Tensor, value: torch.Tensor, next_value: torch.Tensor,
        terminated: torch.Tensor, truncated: torch.Tensor, gamma: float, gae_lambda: float,
        next_active: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets (``advantage + value``), both ``(T, E)``.

    ``reward``, ``value`` (``V(s_t)``), ``next_value`` (``V(next_obs_t)``, e.g. from
    :func:`bootstrap_values`): float ``(T, E)``; ``terminated``, ``truncated``: 0/1 or bool
    ``(T, E)``; ``next_active``: 0/1 ``(T, E)``, whether the agent is active at row ``t + 1``
    (the last row's entry is unused); None means always.
    """
    terminated, truncated = terminated.float(), truncated.float()
    delta = reward + gamma * (1.0 - terminated) * next_value - value
    carry_on = 1.0 - torch.maximum(terminated, truncated)
    if next_active is not None:
        carry_on = carry_on * next_active.float()
    advantage = torch.zeros_like(delta)
    running = torch.zeros_like(delta[0])
    for t in range(delta.shape[0] - 1, -1, -1):
        running = delta[t] + gamma * gae_lambda * carry_on[t] * running
        advantage[t] = running
    return advantage, advantage + value
