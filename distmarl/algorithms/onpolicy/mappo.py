"""MAPPO (Yu et al. 2022, https://arxiv.org/abs/2103.01955): PPO with decentralised policies and
a centralised value function, with IPPO's parameter sharing per agent group.

The value network of group ``g`` reads an *agent-specific global state* (MAPPO's "AS" input): the
agent's own (network) observation first, then

* the env's global state ``env.state()`` ``(state_dim,)`` when the env has one (a Box
  ``state_space``), ``hp["global_state"]`` is on (the default) and the algorithm was built with
  ``state_space``: rollouts then record the state (:class:`~distmarl.types.RolloutSpec`) and
  fragments carry :data:`~distmarl.types.STATE_FIELDS`; input ``(..., obs_dim + state_dim)``;
* otherwise every other agent's observation in the env's agent order, ``(..., sum obs_dim)``.
  Agents absent at a step contribute zeros.

Every agent of a group gets the same layout (they share their spaces), so the shared value
network learns one function of an ego-centric joint state: it sees all that IPPO's value network
sees, in the same place, plus everything else. (A fixed agent order with a one-hot of the
agent's index instead makes the shared network learn one function per agent from the same data;
on ``simple_spread`` that scored below IPPO.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from gymnasium import spaces

from distmarl.algorithms.common.observations import Input, combined_input, combined_tensor
from distmarl.algorithms.common.space_tensors import obs_dim
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.config.hparams import default_hp
from distmarl.networks.inputs import InputSpec, VectorInput
from distmarl.types import RolloutSpec


class MAPPO(OnPolicyMultiAgent):
    """Multi-agent PPO: shared decentralised policies, centralised value over the joint
    observation or the env's global state.

    ``MAPPO(observation_spaces, action_spaces, net_config, hp=None, device="cpu", seed=None,
    state_space=None)``; ``hp`` overrides :class:`distmarl.config.hparams.MAPPOHyperparameters`;
    ``state_space``: the env's global state space (``env.state_space``, a Box), read by the value
    networks when ``hp["global_state"]``.
    """

    name: ClassVar[str] = "MAPPO"
    DEFAULT_HP: ClassVar[dict[str, Any]] = default_hp("MAPPO")

    def __init__(
        self,
        observation_spaces: Mapping[str, spaces.Space],
        action_spaces: Mapping[str, spaces.Space],
        net_config: Mapping[str, Any] | None,
        hp: Mapping[str, Any] | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        state_space: spaces.Space | None = None,
        learner: bool = True,
    ) -> None:
        if state_space is not None and not isinstance(state_space, spaces.Box):
            raise ValueError(f"state_space must be a gymnasium Box (the env's state_space), got "
                             f"{state_space!r}")
        self._given_state_space = state_space
        self.state_space = (state_space if self.rollout_spec(hp, state_space).global_state
                            else None)
        super().__init__(observation_spaces, action_spaces, net_config, hp, device, seed,
                         learner)

    @classmethod
    def rollout_spec(cls, hp: Mapping[str, Any] | None,
                     state_space: spaces.Space | None) -> RolloutSpec:
        """On-policy, reading the env's global state where ``hp["global_state"]`` (default
        on) and a state space is given."""
        use = (hp or {}).get("global_state", cls.DEFAULT_HP["global_state"])
        return RolloutSpec(on_policy=True, global_state=bool(use) and state_space is not None)

    def _extra_init(self) -> dict[str, Any]:
        return {"state_space": self._given_state_space}

    def _value_input(self) -> str:
        return "own_obs+state" if self.spec.global_state else "joint_obs"

    def state_dict(self) -> dict[str, Any]:
        """:meth:`OnPolicyMultiAgent.state_dict` plus ``value_input``: what the value networks
        read (``"own_obs+state"`` or ``"joint_obs"``)."""
        return {**super().state_dict(), "value_input": self._value_input()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """As :meth:`OnPolicyMultiAgent.load_state_dict`; a state whose value networks read
        another input (states saved before ``value_input`` existed read the joint observation)
        is refused with a ValueError that says how to load it."""
        theirs = state.get("value_input", "joint_obs")
        if state.get("algorithm") == self.name and theirs != self._value_input():
            fix = ("algorithm.hp.global_state=false" if theirs == "joint_obs"
                   else "algorithm.hp.global_state=true on an env with env.state()")
            raise ValueError(f"MAPPO state's value networks read {theirs}, this MAPPO's read "
                             f"{self._value_input()}; build it with {fix} to load this state")
        super().load_state_dict(state)

    def _critic_input(self, group: str) -> InputSpec:
        """The agent's own input and the state, or the agent's own input then the other
        agents' in env order (see :func:`~distmarl.algorithms.common.observations.combined_input`:
        side by side for vectors, parts ``self``, ``other_<i>``, ``state`` otherwise)."""
        a = self.groups[group][0]
        return combined_input(self._named(a, self.inputs, VectorInput(self._state_dim())))

    def _critic_inputs(self, group: str, obs: Mapping[str, Input],
                       state: torch.Tensor | None = None) -> list[Input]:
        """``[obs[agent], state]`` (:attr:`spec`'s ``global_state``) or ``[obs[agent], obs of
        the other agents in env order]`` per agent of ``group`` (:meth:`_critic_input`)."""
        if self.spec.global_state and state is None:
            raise ValueError("MAPPO reads the env's global state here, and none was given")
        spec = self._critic_input(group)
        return [combined_tensor(self._named(a, obs, state), spec) for a in self.groups[group]]

    def _named(self, agent: str, per_agent: Mapping[str, Any], state: Any) -> list[tuple[str, Any]]:
        """``agent``'s value-input pieces in order, named by role."""
        if self.spec.global_state:
            return [("self", per_agent[agent]), ("state", state)]
        others = [b for b in self.agents if b != agent]
        return [("self", per_agent[agent]),
                *((f"other_{i}", per_agent[b]) for i, b in enumerate(others))]

    def _state_dim(self) -> int:
        return obs_dim(self.state_space) if self.state_space is not None else 0
