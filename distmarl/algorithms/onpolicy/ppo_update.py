"""PPO's update epochs on one agent group's rows: shuffled minibatches, the clipped objective,
per-network gradient clipping, and the target-KL early stop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from distmarl import tree
from distmarl.algorithms.common.adam import Adam
from distmarl.algorithms.common.observations import Input
from distmarl.algorithms.onpolicy.policy_heads import PolicyHead
from distmarl.algorithms.onpolicy.ppo_loss import ppo_terms
from distmarl.networks import EvolvableNetwork

_TERMS = ("policy", "value", "entropy", "approx_kl", "clip_fraction")


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


def ppo_update(policy: EvolvableNetwork, value: EvolvableNetwork, head: PolicyHead,
               log_std: torch.nn.Parameter | None, optims: Sequence[Adam],
               d: GroupRows, hp: Mapping[str, Any], generator: torch.Generator
               ) -> dict[str, float]:
    """``hp["update_epochs"]`` passes over ``d`` in minibatches of ``hp["batch_size"]`` rows.

    ``optims`` step every parameter (policy, value, log-std). A minibatch without an active row
    is skipped (an Adam step with zero gradients would still move the weights). After each epoch,
    if ``target_kl`` is set and the epoch's mean approximate KL (each minibatch's measured before
    its step, as CleanRL does) exceeds it, the remaining epochs are skipped. Returns the mean of
    each :class:`~distmarl.algorithms.onpolicy.ppo_loss.PPOTerms` part over the steps taken, ``epochs``,
    and ``skipped_steps``: minibatches whose gradient was not finite, left without a step.
    """
    policy_params = [*policy.parameters(), *([log_std] if log_std is not None else [])]
    sums = dict.fromkeys(_TERMS, 0.0)
    steps = epochs = skipped = 0
    for _ in range(hp["update_epochs"]):
        perm = torch.randperm(d.active.shape[0], generator=generator, device=d.active.device)
        kls: list[float] = []
        for idx in perm.split(hp["batch_size"]):
            active = d.active[idx]
            if not bool(active.any()):
                continue
            rows = lambda x, idx=idx: x[idx]  # noqa: E731
            obs = tree.map(rows, d.obs)
            critic_obs = obs if d.critic_obs is d.obs else tree.map(rows, d.critic_obs)
            new_log_prob, entropy = head.evaluate(policy(obs), log_std, d.action[idx],
                                                  None if d.mask is None else d.mask[idx])
            terms = ppo_terms(new_log_prob, d.log_prob[idx], d.advantage[idx], entropy,
                              value(critic_obs).squeeze(-1), d.value_target[idx],
                              active,
                              hp["clip_coef"], hp["ent_coef"], hp["vf_coef"])
            for opt in optims:
                opt.zero_grad(set_to_none=True)
            terms.loss.backward()
            # per network: one joint norm would let the value loss' scale throttle the policy
            norms = (torch.nn.utils.clip_grad_norm_(policy_params, hp["max_grad_norm"]),
                     torch.nn.utils.clip_grad_norm_(value.parameters(), hp["max_grad_norm"]))
            if not all(bool(torch.isfinite(n)) for n in norms):
                skipped += 1  # a non-finite gradient would turn every weight into NaN
                continue
            for opt in optims:
                opt.step()
            for k in _TERMS:
                sums[k] += float(getattr(terms, k))
            kls.append(float(terms.approx_kl))
            steps += 1
        epochs += 1
        if hp["target_kl"] is not None and kls and np.mean(kls) > hp["target_kl"]:
            break
    return {**{k: v / max(steps, 1) for k, v in sums.items()}, "epochs": float(epochs),
            "skipped_steps": float(skipped)}
