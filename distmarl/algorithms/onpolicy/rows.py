"""One clean fragment -> GAE advantages and value targets -> one agent group's PPO rows, as pure
functions over tensors.

The learner (:class:`~distmarl.algorithms.onpolicy.ppo.OnPolicyMultiAgent`) evaluates its value
networks (what they read depends on the algorithm: IPPO an agent's own observation, MAPPO the
joint observation or the env's global state) and passes the values and critic inputs in; these
functions do the arithmetic and the layout and keep no state.

Advantages follow :mod:`~distmarl.algorithms.onpolicy.gae`: truncations and the fragment's end
bootstrap from ``V(next_obs)``, terminations do not, and the lambda-recursion stops before a row
where the agent is inactive. Rows are flattened ``(T, E, ...) -> (T * E, ...)`` per agent and
stacked agent-major, so a group's agents all feed its shared networks' one gradient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from distmarl import tree
from distmarl.algorithms.common.observations import Input
from distmarl.algorithms.onpolicy.fragment import AgentFragment
from distmarl.algorithms.onpolicy.gae import gae
from distmarl.algorithms.onpolicy.policy_heads import stacked_masks
from distmarl.types import STATE_FIELDS

__all__ = ["GroupRows", "fragment_advantages", "global_state", "group_rows"]

Tensors = dict[str, torch.Tensor]


class GroupRows(NamedTuple):
    """One group's fragment flattened to ``N = T * E * len(group)`` rows (agent-major)."""

    obs: Input  #: (N, obs_dim) policy input (images (N, *image), or a dict)
    critic_obs: Input  #: (N, critic_dim) value input, as ``obs``
    mask: torch.Tensor | None  #: (N, n) bool action mask
    action: torch.Tensor  #: (N, dim) float or (N,) int64, the head's internal form
    log_prob: torch.Tensor  #: (N,) behaviour log-prob
    advantage: torch.Tensor  #: (N,)
    value_target: torch.Tensor  #: (N,)
    active: torch.Tensor  #: (N,) bool


def global_state(frag: Mapping[str, AgentFragment], field: str, reader: str) -> torch.Tensor:
    """The fragment's global ``state`` or ``next_state`` (``field``) ``(T, E, state_dim)``
    (every agent carries the same rows); a KeyError naming the missing fields when the batch
    had none, ``reader`` being the algorithm that needs them."""
    x: torch.Tensor | None = getattr(next(iter(frag.values())), field)
    if x is None:
        raise KeyError(f"this {reader} reads the env's global state, but the batch lacks the "
                       f"fields {list(STATE_FIELDS)}")
    return x


def fragment_advantages(frag: Mapping[str, AgentFragment],
                        next_values: Mapping[str, torch.Tensor], gamma: float,
                        gae_lambda: float) -> tuple[Tensors, Tensors]:
    """GAE advantages and value targets ``(T, E)`` for every agent of ``next_values``, from its
    clean fragment and ``next_values[agent]``: ``V(next_obs)`` ``(T, E)`` in return units."""
    advantage: Tensors = {}
    target: Tensors = {}
    for a, v_next in next_values.items():
        f = frag[a]
        advantage[a], target[a] = gae(f.reward, f.value, v_next, f.terminated, f.truncated,
                                      gamma, gae_lambda, f.active)
    return advantage, target


def group_rows(frags: Sequence[AgentFragment], critic_obs: Sequence[Input],
               advantage: Sequence[torch.Tensor], target: Sequence[torch.Tensor],
               action_dim: int, device: torch.device) -> GroupRows:
    """One group's rows from its agents' fragments, critic inputs ``(T, E, critic_dim)``,
    advantages and value targets ``(T, E)`` (each in the group's agent order). ``target`` is
    what the value network's output is fitted to; ``action_dim`` the policy head's width (the
    masks' width)."""
    n = frags[0].reward.numel()

    def rows(x: torch.Tensor) -> torch.Tensor:  # (T, E, ...) -> (T * E, ...)
        return x.reshape(n, *x.shape[2:])

    def cat(xs: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.cat([rows(x) for x in xs])

    def cat_inputs(xs: Sequence[Input]) -> Input:
        return tree.concat([tree.map(rows, x) for x in xs])

    masks = [None if f.mask is None else rows(f.mask) for f in frags]
    obs = cat_inputs([f.obs for f in frags])
    # IPPO's value networks read each agent's own observation: the same rows, held once
    own = all(c is f.obs for c, f in zip(critic_obs, frags, strict=True))
    return GroupRows(
        obs=obs,
        critic_obs=obs if own else cat_inputs(critic_obs),
        mask=stacked_masks(masks, n, action_dim, device),
        action=cat([f.action for f in frags]),
        log_prob=cat([f.log_prob for f in frags]),
        advantage=cat(advantage),
        value_target=cat(target),
        active=cat([f.active for f in frags]),
    )
