"""Acting with PPO policies, as pure functions over observations, networks and heads.

Observations ``obs[agent]`` ``(num_envs, ...)`` (arrays, or PettingZoo-style dicts with an
``"action_mask"``) become network inputs ``(num_envs, obs_dim)`` and bool masks
``(num_envs, n)``. A group's present agents are stacked agent-major along the batch axis (rows
``i * num_envs`` to ``(i + 1) * num_envs`` are the ``i``-th agent's), so its shared policy runs
once per step, and the results are split back per agent. The learner
(:class:`~distmarl.algorithms.onpolicy.ppo.OnPolicyMultiAgent`) owns the networks, heads and
random generator and passes them in; these functions keep no state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from distmarl import tree
from distmarl.algorithms.common.observations import (
    Input,
    ObsReader,
    batch_size,
    mask_tensor,
    zeros_input,
)
from distmarl.algorithms.onpolicy.policy_heads import PolicyHead, stacked_masks
from distmarl.networks import EvolvableNetwork
from distmarl.networks.inputs import InputSpec

__all__ = ["observation_tensors", "padded_obs", "per_agent", "sample_group", "state_tensor"]


def observation_tensors(obs: Mapping[str, Any], readers: Mapping[str, ObsReader],
                        action_mask: Mapping[str, Any] | None, device: torch.device
                        ) -> tuple[dict[str, Input], dict[str, torch.Tensor | None]]:
    """Network inputs (vectors ``(num_envs, obs_dim)``) and bool masks ``(num_envs, n)`` (None:
    all legal) of the agents present in ``obs``, in the order of ``readers``. A mask given in
    ``action_mask[agent]`` replaces one carried by the observation."""
    x: dict[str, Input] = {}
    masks: dict[str, torch.Tensor | None] = {}
    for a, reader in readers.items():
        if a in obs:
            x[a], masks[a] = reader.tensor(obs[a], device), reader.mask(obs[a], device)
            if action_mask is not None and action_mask.get(a) is not None:
                masks[a] = mask_tensor(action_mask[a], device)
    return x, masks


def state_tensor(state: Any, device: torch.device) -> torch.Tensor:
    """The env's global state ``(num_envs, ...)`` -> ``(num_envs, state_dim)`` float32, NaN
    placeholders -> 0."""
    s = torch.as_tensor(np.asarray(state), dtype=torch.float32, device=device)
    return torch.nan_to_num(s.reshape(s.shape[0], -1), nan=0.0)


def sample_group(policy: EvolvableNetwork, head: PolicyHead, log_std: torch.Tensor | None,
                 x: Mapping[str, Input], masks: Mapping[str, torch.Tensor | None],
                 explore: bool, generator: torch.Generator
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Actions (env form) and behaviour log-probs (float32 ``(num_envs,)``) per agent of one
    group, from the inputs ``x[agent]`` ``(num_envs, obs_dim)`` and masks of its present agents
    (the same keys): one call of the group's ``policy``, sampled by ``head`` (exploring: a
    sample drawn from ``generator``, else the mean / arg-max action)."""
    agents = list(x)
    n = batch_size(x[agents[0]])
    out = policy(tree.concat([x[a] for a in agents]))
    mask = stacked_masks([masks[a] for a in agents], n, head.dim, out.device)
    action, log_prob = head.sample(out, log_std, mask, explore, generator)
    return ({a: head.to_env(rows) for a, rows in zip(agents, action.split(n))},
            per_agent(log_prob, agents))


def padded_obs(x: Mapping[str, Input], inputs: Mapping[str, InputSpec], n: int,
               device: torch.device) -> dict[str, Input]:
    """Every agent's network input (``n`` rows) in the order of ``inputs``: zeros for an agent
    absent from ``x`` (what a value network reading other agents sees of it)."""
    return {a: x[a] if a in x else zeros_input(spec, n, device) for a, spec in inputs.items()}


def per_agent(rows: torch.Tensor, agents: Sequence[str]) -> dict[str, np.ndarray]:
    """Agent-major stacked rows ``(len(agents) * n,)`` -> float32 numpy ``(n,)`` per agent."""
    n = rows.shape[0] // len(agents)
    return {a: r.float().cpu().numpy().astype(np.float32, copy=False)
            for a, r in zip(agents, rows.split(n))}
