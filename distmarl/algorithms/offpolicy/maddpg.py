"""MADDPG (Lowe et al. 2017, https://arxiv.org/abs/1706.02275) with AgileRL's hyperparameters.

Per agent ``i``, on a batch of joint transitions (inactive rows of ``i`` masked out):

- critic: minimise ``(Q_i(s, a_1..a_n) - y_i)^2`` with
  ``y_i = r_i + gamma * (1 - terminated_i) * Q'_i(s', mu'_1(o'_1)..mu'_n(o'_n))``
  (truncation bootstraps: the true final observation ``s'`` still has value);
- actor: maximise ``Q_i(s, a_1..mu_i(o_i)..a_n)`` (other agents' actions from the batch);
- targets: Polyak averaging with ``tau`` after every update.

Box actions are ``tanh`` outputs scaled to the bounds; Discrete actions use Gumbel-softmax
(:mod:`distmarl.algorithms.common.space_tensors`). The machinery is shared with MATD3 in
:mod:`distmarl.algorithms.offpolicy.ddpg`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.config.hparams import default_hp


class MADDPG(OffPolicyMultiAgent):
    """Multi-agent DDPG: centralised critics, decentralised deterministic actors.

    ``MADDPG(observation_spaces, action_spaces, net_config, hp=None, device="cpu", seed=None)``;
    ``hp`` overrides :class:`distmarl.config.hparams.MADDPGHyperparameters`.
    """

    name: ClassVar[str] = "MADDPG"
    DEFAULT_HP: ClassVar[dict[str, Any]] = default_hp("MADDPG")
    CRITIC_ROLES: ClassVar[tuple[str, ...]] = ("critic",)
