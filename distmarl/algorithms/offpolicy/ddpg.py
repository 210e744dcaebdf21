"""Shared machinery of MADDPG and MATD3: decentralised actors, centralised critics.

Networks (a :class:`NetworkSet`): ``actor/<agent>`` maps the agent's own observation to its
action; ``<role>/<agent>`` for each role in ``CRITIC_ROLES`` maps all agents' observations (and,
after the encoder, all agents' critic-form actions) to the agent's Q-value. Each has a target copy
and an Adam optimiser. Subclasses choose the target actions, the bootstrap value and when actors
update (:meth:`_target_action`, :meth:`_next_q`, :meth:`_actor_update_due`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces

from distmarl.algorithms.base import AgentObs, Batch, ReplayLearner
from distmarl.algorithms.common import mutate
from distmarl.algorithms.common.grouped_step import grouped_step
from distmarl.algorithms.common.metrics import to_floats
from distmarl.algorithms.common.netset import NetworkSet
from distmarl.algorithms.common.observations import (
    Input,
    batch_size,
    joint_input,
    mask_tensor,
    obs_readers,
)
from distmarl.algorithms.common.space_tensors import make_codec
from distmarl.algorithms.offpolicy.batch import (
    CleanBatch,
    clean_batch,
    masked_mean,
    masked_mse,
    td_target,
)
from distmarl.algorithms.offpolicy.noise import NOISE_HP, ActionNoise, make_noise
from distmarl.config.hparams import check_hp, check_hp_value
from distmarl.config.replay import stored_hp
from distmarl.networks import EvolvableNetwork, NetworkArch, make_arch, resolve_net_config

STATE_FORMAT = 1


class OffPolicyMultiAgent(ReplayLearner):
    """Base of MADDPG / MATD3 (see the module docstring); not used on its own."""

    name: ClassVar[str] = "OffPolicyMultiAgent"
    DEFAULT_HP: ClassVar[dict[str, Any]] = {}
    CRITIC_ROLES: ClassVar[tuple[str, ...]] = ("critic",)

    def __init__(
        self,
        observation_spaces: Mapping[str, spaces.Space],
        action_spaces: Mapping[str, spaces.Space],
        net_config: Mapping[str, Any] | None,
        hp: Mapping[str, Any] | None = None,
        device: str | torch.device = "cpu",
        seed: int | None = None,
    ) -> None:
        super().__init__(observation_spaces, action_spaces, net_config, hp, device, seed)
        self.codecs = {a: make_codec(s, self.device) for a, s in self.action_spaces.items()}
        self.readers = obs_readers(self.observation_spaces, self.net_config)
        self.joint = joint_input(self.readers)
        self.nets = NetworkSet()
        self._build_networks(
            resolve_net_config(self.net_config, self.agents,
                               {a: r.input for a, r in self.readers.items()}),
            resolve_net_config(self.net_config, self.agents, dict.fromkeys(self.agents, self.joint)))
        self._noise: dict[str, ActionNoise] = {}
        self.learn_steps = 0

    def _build_networks(self, configs: Mapping[str, Any], critic_configs: Mapping[str, Any]
                        ) -> None:
        """Actors read their agent's observation; critics every agent's (:attr:`joint`) and,
        after the encoder, every agent's action."""
        gen = torch.Generator().manual_seed(int(self._rng.integers(2**62)))
        joint_act = sum(c.dim for c in self.codecs.values())
        for a in self.agents:
            arch = make_arch(self.readers[a].input, self.codecs[a].dim, configs[a])
            self.nets.add(f"actor/{a}", EvolvableNetwork.build(arch, gen, self.device),
                          self.hp["lr_actor"])
        for role in self.CRITIC_ROLES:
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
        """One update per batch, reading nothing back from the device until all are done
        (:mod:`~distmarl.algorithms.common.metrics`). Each updates every critic, then (when
        due) every actor and all targets; see the subclasses. All critics take one joint
        optimiser step (:func:`grouped_step`), then all actors do: the same updates as one
        network at a time, since no network's parameters appear in another's loss, with one
        backward pass and one Adam call per phase instead of one per network.

        With ``weights`` (prioritised replay's importance weights ``(B,)`` per batch) each
        row's squared critic error is scaled by its weight, and each row's new priority is its
        absolute TD error averaged over the critics of the agents active on it (a row's agents
        share one priority, since the buffer stores a row of all agents)."""
        metrics, priorities = [], []
        for i, batch in enumerate(batches):
            m, p = self._update(batch, None if weights is None else weights[i],
                                with_priorities=weights is not None)
            metrics.append(m)
            if p is not None:
                priorities.append(p)
        return (to_floats(metrics),
                torch.cat(priorities).cpu().numpy() if priorities else None)

    def _update(self, batch: Batch, weights: torch.Tensor | None, with_priorities: bool
                ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """One update of :meth:`learn_batches`, its metrics and priorities ``(B,)`` left on the
        device; the TD-error bookkeeping only when ``with_priorities`` (uniform replay's
        learners need none of it)."""
        b = clean_batch(batch, self.readers, self.codecs, self.device)
        joint_obs, joint_act = b.joint_obs(), self._joint(b.action, b.active)
        w = None if weights is None else weights.reshape(-1, 1).to(self.device)
        with torch.no_grad():
            next_obs = b.joint_next_obs()
            next_act = self._joint({a: self._target_action(a, b.next_obs[a], b.next_mask[a])
                                    for a in self.agents}, b.active)
        losses: dict[str, torch.Tensor] = {}
        td_sum = torch.zeros_like(b.active[self.agents[0]])
        for a in self.agents:
            with torch.no_grad():
                y = td_target(b.reward[a], b.terminated[a], self._next_q(a, next_obs, next_act),
                              self.hp["gamma"], b.n_steps[a])
            for role in self.CRITIC_ROLES:
                q = self.nets.online[f"{role}/{a}"](joint_obs, joint_act)
                losses[f"{role}/{a}"] = masked_mse(q, y, b.active[a], w)
                if with_priorities:
                    td_sum = td_sum + (q.detach() - y).abs() * b.active[a]
        self._step(list(losses), losses.values())
        if self._actor_update_due():
            actor_losses = {f"actor/{a}": self._actor_loss(a, b, joint_obs) for a in self.agents}
            self._step(list(actor_losses), actor_losses.values())
            losses.update(actor_losses)
            self.nets.soft_update(list(self.nets.online), self.hp["tau"])
        self.learn_steps += 1
        metrics = {f"loss/{k}": v.detach() for k, v in losses.items()}
        if not with_priorities:
            return metrics, None
        critics = torch.cat([b.active[a] for a in self.agents], dim=-1).sum(dim=-1, keepdim=True)
        priorities = td_sum / (critics * len(self.CRITIC_ROLES)).clamp_min(1.0)
        return metrics, priorities.reshape(-1)

    def _joint(self, actions: Mapping[str, torch.Tensor], active: Mapping[str, torch.Tensor]
               ) -> torch.Tensor:
        """The critics' joint action ``(B, sum of action dims)``: each agent's, zeros on rows
        where it is inactive. A seat a league opponent holds is then part of the env to the
        critics, not a choice of this member's own actor for that seat (which never learns
        it, so its target action would be noise); so is an agent that is gone."""
        return torch.cat([actions[a] * active[a] for a in self.agents], dim=-1)

    def _target_action(self, agent: str, next_obs: Input,
                       next_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Critic-form action of the target actor ``(B, act_dim)``, a legal one."""
        out = self.nets.target[f"actor/{agent}"](next_obs)
        return self.codecs[agent].target(out, self._torch_gen, next_mask)

    def _next_q(self, agent: str, next_obs: Input, next_act: torch.Tensor) -> torch.Tensor:
        """Bootstrap value ``Q'(s', a')`` of ``agent`` ``(B, 1)``."""
        return self.nets.target[f"critic/{agent}"](next_obs, next_act)

    def _actor_update_due(self) -> bool:
        return True

    def _actor_loss(self, agent: str, b: CleanBatch, joint_obs: Input) -> torch.Tensor:
        """Deterministic policy gradient through the agent's first critic, other actions fixed."""
        out = self.actor(agent)(b.obs[agent])
        own = self.codecs[agent].policy(out, self._torch_gen, b.mask[agent])
        actions = self._joint({**b.action, agent: own}, b.active)
        critic = self.nets.online[f"critic/{agent}"]
        loss = -masked_mean(critic(joint_obs, actions), b.active[agent])
        if self.hp["actor_reg"] > 0:  # keeps pre-tanh outputs / logits from saturating
            reg = masked_mean(out.pow(2).mean(dim=-1, keepdim=True), b.active[agent])
            loss = loss + self.hp["actor_reg"] * reg
        return loss

    def _step(self, names: list[str], losses: Iterable[torch.Tensor]) -> None:
        """One Adam step of each network in ``names`` on its own loss (:func:`grouped_step`).
        Gradients are taken with respect to these networks' parameters only, so the critic in
        an actor loss gets none (nothing to freeze, no wasted weight gradients)."""
        grouped_step([self.nets.optim[n] for n in names], torch.stack(list(losses)).sum(),
                     self.hp["max_grad_norm"])

    # -- weights and state -----------------------------------------------------------------

    def get_weights(self) -> dict[str, Any]:
        """Actors' architectures and weights (numpy copies), the exploration hyperparameters
        and the ``algorithm``'s name (a worker whose member changed algorithm rebuilds)."""
        params: dict[str, np.ndarray] = {}
        for a in self.agents:
            for k, v in self.actor(a).state_dict().items():
                params[f"actor/{a}/{k}"] = v.detach().cpu().numpy().copy()
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
