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
    SMOOTHED_TARGETS: ClassVar[bool] = True

    def actor_update_due(self) -> bool:
        """Every ``policy_freq`` updates (counted by ``learn_steps``)."""
        return self.learn_steps % self.hp["policy_freq"] == 0
