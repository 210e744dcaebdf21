"""MATD3 (Ackermann et al. 2019, https://arxiv.org/abs/1910.01465): MADDPG with TD3's fixes.

- twin critics per agent (``critic/<agent>`` and ``critic_2/<agent>``), each trained towards
  ``y_i = r_i + gamma * (1 - terminated_i) * min(Q'_i1, Q'_i2)(s', a')``;
- target policy smoothing: Box target actions get clipped Gaussian noise
  (``policy_noise``, clipped to ``noise_clip``, in units of the action half-range, i.e. TD3's
  values for a [-1, 1] action) before being clipped to the bounds. Discrete target actions are
  already Gumbel samples, which smooth them;
- delayed updates: actors and all target networks update every ``policy_freq`` learn calls.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from distmarl.algorithms.common.observations import Input
from distmarl.algorithms.common.space_tensors import BoxCodec
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.config.hparams import default_hp


class MATD3(OffPolicyMultiAgent):
    """Multi-agent TD3.

    ``MATD3(observation_spaces, action_spaces, net_config, hp=None, device="cpu", seed=None)``;
    ``hp`` overrides :class:`distmarl.config.hparams.MATD3Hyperparameters`.
    """

    name: ClassVar[str] = "MATD3"
    DEFAULT_HP: ClassVar[dict[str, Any]] = default_hp("MATD3")
    CRITIC_ROLES: ClassVar[tuple[str, ...]] = ("critic", "critic_2")

    def _target_action(self, agent: str, next_obs: Input,
                       next_mask: torch.Tensor | None = None) -> torch.Tensor:
        u = super()._target_action(agent, next_obs, next_mask)
        if not isinstance(self.codecs[agent], BoxCodec) or self.hp["policy_noise"] == 0:
            return u
        noise = torch.randn(u.shape, generator=self._torch_gen, device=u.device)
        clip = self.hp["noise_clip"]
        return (u + (noise * self.hp["policy_noise"]).clamp(-clip, clip)).clamp(-1.0, 1.0)

    def _next_q(self, agent: str, next_obs: Input, next_act: torch.Tensor) -> torch.Tensor:
        q1 = self.nets.target[f"critic/{agent}"](next_obs, next_act)
        q2 = self.nets.target[f"critic_2/{agent}"](next_obs, next_act)
        return torch.minimum(q1, q2)

    def _actor_update_due(self) -> bool:
        return self.learn_steps % self.hp["policy_freq"] == 0
