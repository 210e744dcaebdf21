"""Shared machinery of MADDPG and MATD3: decentralised actors, centralised critics.

Networks (a :class:`NetworkSet`): ``actor/<agent>`` maps the agent's own observation to its
action; ``<role>/<agent>`` for each role in ``CRITIC_ROLES`` maps all agents' observations (and,
after the encoder, all agents' critic-form actions) to the agent's Q-value. Each has a target copy
and an Adam optimiser. Learning is :mod:`~distmarl.algorithms.offpolicy.stack`'s update, the
same for a member alone and for members stacked on one learner; subclasses declare how they
differ (``CRITIC_ROLES``, ``SMOOTHED_TARGETS``, :meth:`actor_update_due`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces

from distmarl.algorithms.base import AgentObs, Batch, ReplayLearner, require_learner
from distmarl.algorithms.common import mutate
from distmarl.algorithms.common.adam import adam_settings
from distmarl.algorithms.common.netset import NetworkSet
from distmarl.algorithms.common.observations import (
    batch_size,
    joint_input,
    mask_tensor,
    obs_readers,
)
from distmarl.algorithms.common.slab import host_arrays
from distmarl.algorithms.common.space_tensors import make_codec
from distmarl.algorithms.offpolicy.noise import NOISE_HP, ActionNoise, make_noise
from distmarl.algorithms.offpolicy.stack import OffPolicyStack
from distmarl.config.hparams import check_hp, check_hp_value
from distmarl.config.replay import stored_hp
from distmarl.networks import EvolvableNetwork, NetworkArch, make_arch, resolve_net_config

STATE_FORMAT = 1


class OffPolicyMultiAgent(ReplayLearner):
    """Base of MADDPG / MATD3 (see the module docstring); not used on its own."""

    name: ClassVar[str] = "OffPolicyMultiAgent"
    DEFAULT_HP: ClassVar[dict[str, Any]] = {}
    CRITIC_ROLES: ClassVar[tuple[str, ...]] = ("critic",)
    #: clipped Gaussian noise on Box target actions (MATD3's target smoothing)
    SMOOTHED_TARGETS: ClassVar[bool] = False

    def __init__(
        self,
        observation_spaces: Mapping[str, spaces.Space],
        action_spaces: Mapping[str, spaces.Space],
        net_config: Mapping[str, Any] | None,
        hp: Mapping[str, Any] | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        learner: bool = True,
    ) -> None:
        super().__init__(observation_spaces, action_spaces, net_config, hp, device, seed,
                         learner)
        self.codecs = {a: make_codec(s, self.device) for a, s in self.action_spaces.items()}
        self.readers = obs_readers(self.observation_spaces, self.net_config)
        self.joint = joint_input(self.readers)
        self.nets = NetworkSet(learning=learner)
        self._build_networks(
            resolve_net_config(self.net_config, self.agents,
                               {a: r.input for a, r in self.readers.items()}),
            resolve_net_config(self.net_config, self.agents, dict.fromkeys(self.agents, self.joint)))
        self._noise: dict[str, ActionNoise] = {}
        self.learn_steps = 0
        #: the stack of one this member learns in (built on the first update)
        self._stack: OffPolicyStack | None = None

    def _build_networks(self, configs: Mapping[str, Any], critic_configs: Mapping[str, Any]
                        ) -> None:
        """Actors read their agent's observation; critics (a learner's) every agent's
        (:attr:`joint`) and, after the encoder, every agent's action."""
        gen = torch.Generator().manual_seed(int(self._rng.integers(2**62)))
        joint_act = sum(c.dim for c in self.codecs.values())
        for a in self.agents:
            arch = make_arch(self.readers[a].input, self.codecs[a].dim, configs[a])
            self.nets.add(f"actor/{a}", EvolvableNetwork.build(arch, gen, self.device),
                          self.hp["lr_actor"])
        for role in self.CRITIC_ROLES if self.learner else ():
            for a in self.agents:
                arch = make_arch(self.joint, 1, critic_configs[a], extra_dim=joint_act)
                self.nets.add(f"{role}/{a}", EvolvableNetwork.build(arch, gen, self.device),
                              self.hp["lr_critic"])

    # -- acting ----------------------------------------------------------------------------

    def actor(self, agent: str) -> EvolvableNetwork:
        """The online actor of ``agent``."""
        return self.nets.online[f"actor/{agent}"]

    def acting_network(self, agent: str) -> EvolvableNetwork:
        return self.actor(agent)

    @torch.no_grad()
    def act(self, obs: AgentObs, explore: bool = True,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """See :meth:`Algorithm.act`; agents missing from ``obs`` get no action."""
        actions: dict[str, np.ndarray] = {}
        for a in self.agents:
            if a not in obs:
                continue
            reader = self.readers[a]
            x = reader.tensor(obs[a], self.device)
            mask = reader.mask(obs[a], self.device)
            if action_mask is not None and action_mask.get(a) is not None:
                mask = mask_tensor(action_mask[a], self.device)
            codec = self.codecs[a]
            rows = batch_size(x)
            noise = self._noise_for(a, rows).sample() if explore and codec.uses_noise else None
            actions[a] = codec.act(self.actor(a)(x), explore, noise, self._torch_gen, mask)
        return actions

    def _noise_for(self, agent: str, num_envs: int) -> ActionNoise:
        noise = self._noise.get(agent)
        if noise is None or noise.num_envs != num_envs:
            noise = make_noise(self.hp, num_envs, self.codecs[agent].dim, self._rng)
            self._noise[agent] = noise
        return noise

    def reset_noise(self, mask: np.ndarray) -> None:
        """Restart the noise of the sub-envs where ``mask`` is True."""
        for noise in self._noise.values():
            noise.reset(mask)

    # -- learning --------------------------------------------------------------------------

    def learn_batches(self, batches: Sequence[Batch],
                      weights: Sequence[torch.Tensor] | None = None
                      ) -> tuple[list[dict[str, float]], np.ndarray | None]:
        """One update per batch, as a stack of one (:mod:`~distmarl.algorithms.offpolicy.stack`:
        the one update there is), kept from call to call while this member lives in it. Each
        updates every critic, then (when due) every actor and all targets. With ``weights``
        (prioritised replay's importance weights ``(B,)`` per batch) each row's squared critic
        error is scaled by its weight, and each row's new priority is its absolute TD error
        averaged over the critics of the agents active on it (a row's agents share one
        priority, since the buffer stores a row of all agents). Each update's metrics
        (``loss/<network>``) and the priorities, read from the device once all are done."""
        stack = self._stack
        if stack is None or not stack.intact():
            require_learner(self)
            stack = self._stack = OffPolicyStack([self])
        return stack.learn_batches([batches], None if weights is None else [weights])[0]

    def stack_settings(self) -> dict[str, Any]:
        """See :meth:`Algorithm.stack_settings`: network shapes and Adam settings."""
        return {"networks": self.nets.arch(),
                "optimisers": {n: adam_settings(o) for n, o in self.nets.optim.items()}}

    def actor_update_due(self) -> bool:
        """Whether the next update steps the actors and targets (MADDPG: always)."""
        return True

    # -- weights and state -----------------------------------------------------------------

    def get_weights(self) -> dict[str, Any]:
        """Actors' architectures and weights (numpy copies, in one copy from the device:
        :func:`host_arrays`), the exploration hyperparameters and the ``algorithm``'s name (a
        worker whose member changed algorithm rebuilds)."""
        params = host_arrays({f"actor/{a}/{k}": v for a in self.agents
                              for k, v in self.actor(a).state_dict().items()})
        return {"arch": {"actors": {a: self.actor(a).arch.to_dict() for a in self.agents}},
                "params": params, "hp": {k: self.hp[k] for k in NOISE_HP},
                "algorithm": self.name}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load actors from :meth:`get_weights`. An actor whose architecture differs is rebuilt
        with a fresh target and optimiser (this is for acting; learners copy via load_state_dict)."""
        for a in self.agents:
            name, arch = f"actor/{a}", weights["arch"]["actors"][a]
            prefix = f"{name}/"
            params = {k[len(prefix):]: torch.from_numpy(np.array(v))  # own a writable copy
                      for k, v in weights["params"].items() if k.startswith(prefix)}
            if self.actor(a).arch.to_dict() == arch:
                self.actor(a).load_state_dict(params)
                continue
            net = EvolvableNetwork.build(NetworkArch.from_dict(arch),
                                         torch.Generator().manual_seed(0), self.device)
            net.load_state_dict(params)
            self.nets.add(name, net, self.hp["lr_actor"])  # target: a copy of the loaded actor
        for k, v in weights.get("hp", {}).items():
            if self.hp[k] != v:
                self.set_hyperparameter(k, v)

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, optimisers, hyperparameters, counters, RNG and noise states."""
        require_learner(self)
        return {
            "algorithm": self.name,
            "format": STATE_FORMAT,
            "agents": list(self.agents),
            "hp": dict(self.hp),
            "networks": self.nets.state_dict(),
            "learn_steps": self.learn_steps,
            "rng": self._rng_state(),
            "noise": {a: {"num_envs": n.num_envs, **n.state_dict()} for a, n in self._noise.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict` output (possibly from another member, or another device)."""
        self._check_fits(state)
        self.nets.load_state_dict(state["networks"], self.device)
        self.hp = check_hp(self.name, stored_hp(state["hp"]))
        self.learn_steps = int(state["learn_steps"])
        self._load_rng_state(state["rng"])
        self._noise = {}
        for a, s in state["noise"].items():
            self._noise_for(a, int(s["num_envs"])).load_state_dict(s)

    def clone(self) -> OffPolicyMultiAgent:
        """An independent copy with the same state (tensors are copied, never shared)."""
        new = type(self)(self.observation_spaces, self.action_spaces, self.net_config, self.hp,
                         self.device, seed=0)
        new.load_state_dict(self.state_dict())
        return new

    def reseed(self, seed: int | None) -> None:
        """New random streams (noise, Gumbel samples, target smoothing); see
        :meth:`Algorithm.reseed`."""
        super().reseed(seed)
        self._noise = {}

    # -- hyperparameters and evolution -----------------------------------------------------

    def set_hyperparameter(self, name: str, value: Any) -> None:
        """Change ``hp[name]``. A learning rate goes straight into the optimisers' param groups;
        Adam's moment estimates are kept: they are running averages of the gradient and its
        square, which do not depend on the rate, so the next step is simply scaled by the new
        rate. Resetting them would discard the curvature scale and restart bias correction.
        Noise settings restart the noise processes."""
        value = check_hp_value(self.name, name, value)
        self.hp[name] = value
        if name == "lr_actor":
            self.nets.set_lr(self.nets.names("actor"), value)
        elif name == "lr_critic":
            self.nets.set_lr([n for r in self.CRITIC_ROLES for n in self.nets.names(r)], value)
        elif name in NOISE_HP:
            self._noise = {}

    def mutate_architecture(self, kind: str, rng: np.random.Generator,
                            preserve_output: bool = True) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_architecture`."""
        return mutate.mutate_architecture(self.nets, kind, rng, preserve_output,
                                             reference=f"actor/{self.agents[0]}")

    def mutate_activation(self, rng: np.random.Generator,
                          choices: Sequence[str] | None = None) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_activation`."""
        return mutate.mutate_activation(self.nets, rng, f"actor/{self.agents[0]}", choices)

    def mutate_parameters(self, mutation_sd: float, rng: np.random.Generator) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_parameters` (actors only)."""
        return mutate.mutate_parameters(self.nets, self.nets.names("actor"), mutation_sd, rng)
