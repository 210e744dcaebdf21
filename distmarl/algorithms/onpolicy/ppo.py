"""Shared machinery of IPPO and MAPPO: PPO with one policy and one value network per agent group.

Agents named ``<group>_<idx>`` with the same spaces share parameters (AgileRL's homogeneous
agents; groups as :mod:`distmarl.agents` defines them, ``net_config`` per group by
:mod:`~distmarl.algorithms.common.sharing`): ``policy/<group>`` maps an agent's own observation
to its action distribution (:mod:`~distmarl.algorithms.onpolicy.policy_heads`; Box policies
also have a learned ``log_std/<group>`` vector), ``value/<group>`` maps the critic input of one
agent (:meth:`OnPolicyMultiAgent._critic_inputs`: its own observation in IPPO; in MAPPO the
joint observation, or its own observation and the env's global state) to ``V``. A group's
agents are stacked along the batch axis, so every agent's rows contribute to the one shared
gradient.

Usage (the single-process loop; the runtime does the same across processes)::

    algo = IPPO(observation_spaces, action_spaces, net_config, hp, seed=0)
    actions, extras = algo.act_with_info(obs)   # extras: log_prob, value per agent (num_envs,)
    # (a MAPPO that reads the env's global state: act_with_info(obs, state=infos["state"]))
    ...store a fragment of hp["learn_step"] vectorised steps (ON_POLICY_FIELDS; next_value:
    the next step's value, or algo.value_estimates(final_obs) where an episode ended)...
    metrics = algo.learn(batch)                 # field -> agent -> tensor (T, E, ...)

Acting runs each group's policy once on its agents' stacked observations
(:mod:`~distmarl.algorithms.onpolicy.acting`). Learning from one fragment: GAE advantages
(:mod:`~distmarl.algorithms.onpolicy.gae`; truncations and the fragment's end bootstrap from
the recorded ``V(next_obs)``, terminations do not) laid out as one set of rows per group
(:mod:`~distmarl.algorithms.onpolicy.rows`), then per group ``update_epochs`` passes of
shuffled minibatches of ``batch_size`` rows (:mod:`~distmarl.algorithms.onpolicy.stack`'s
update, the same for a member alone and for members stacked on one learner) with the clipped
objective (:mod:`~distmarl.algorithms.onpolicy.ppo_loss`), advantages
normalised per minibatch, gradient norms clipped per network, and an early stop when an epoch's
mean approximate KL exceeds ``target_kl``. One learning rate ``lr`` for every network
(AgileRL's IPPO). With ``value_norm`` (the default) the value networks predict normalised
values (:mod:`~distmarl.algorithms.onpolicy.value_norm`, one set of running moments per group);
every value outside the loss is in return units. The weights sent to rollout workers are plain
data (:mod:`~distmarl.algorithms.onpolicy.weights`).

Networks live in a :class:`NetworkSet` so the evolution hooks
(:mod:`~distmarl.algorithms.common.mutate`) apply as for the off-policy learners; its target
copies are not used by PPO.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces

from distmarl import tree
from distmarl.agents import shared_groups
from distmarl.algorithms.base import AgentObs, Batch, FragmentLearner, require_learner
from distmarl.algorithms.common import mutate
from distmarl.algorithms.common.adam import Adam, adam_settings
from distmarl.algorithms.common.netset import NetworkSet
from distmarl.algorithms.common.observations import Input, batch_size, obs_readers
from distmarl.algorithms.common.sharing import group_net_configs
from distmarl.algorithms.onpolicy import acting, rows
from distmarl.algorithms.onpolicy.fragment import AgentFragment, clean_fragment
from distmarl.algorithms.onpolicy.policy_heads import INIT_LOG_STD, PolicyHead, make_head
from distmarl.algorithms.onpolicy.rows import GroupRows
from distmarl.algorithms.onpolicy.stack import SHARED_HP, OnPolicyStack
from distmarl.algorithms.onpolicy.value_norm import RunningMoments
from distmarl.algorithms.onpolicy.weights import load_weights, pack_weights
from distmarl.config.hparams import check_hp, check_hp_value, default_hp
from distmarl.networks import EvolvableNetwork, make_arch
from distmarl.networks.inputs import InputSpec
from distmarl.types import RolloutSpec

__all__ = ["OnPolicyMultiAgent"]

STATE_FORMAT = 2  # 2: value-normalisation moments (``value_norm``)
#: hyperparameters fixed when the learner is built (they shape the value networks)
FIXED_HP = ("value_norm", "global_state")
Tensors = dict[str, torch.Tensor]


class OnPolicyMultiAgent(FragmentLearner):
    """Base of IPPO / MAPPO (see the module docstring); not used on its own."""

    name: ClassVar[str] = "OnPolicyMultiAgent"
    DEFAULT_HP: ClassVar[dict[str, Any]] = default_hp("IPPO")
    #: the env's global state space when the value networks read it, else None
    state_space: spaces.Box | None = None

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
        #: group id -> its agents; every agent's group in ``group_of``
        self.groups = shared_groups(self.agents, self.observation_spaces, self.action_spaces)
        self.group_of = {a: g for g, members in self.groups.items() for a in members}
        self.heads: dict[str, PolicyHead] = {
            g: make_head(self.action_spaces[m[0]], self.device) for g, m in self.groups.items()}
        self.readers = obs_readers(self.observation_spaces, self.net_config)
        #: what each agent's policy reads
        self.inputs: dict[str, InputSpec] = {a: r.input for a, r in self.readers.items()}
        self.nets = NetworkSet(learning=learner)
        self.log_std: dict[str, torch.nn.Parameter] = {}
        self.log_std_optim: dict[str, Adam] = {}
        self._build_networks(
            group_net_configs(self.net_config, self.groups, self.name,
                              {g: self.inputs[m[0]] for g, m in self.groups.items()}),
            group_net_configs(self.net_config, self.groups, self.name,
                              {g: self._critic_input(g) for g in self.groups}))
        #: running moments of each group's value targets (used when ``hp["value_norm"]``)
        self.value_moments = {g: RunningMoments() for g in self.groups}
        self.learn_steps = 0
        #: this member's update, a stack of one (kept while its tensors live in it)
        self._stack: OnPolicyStack | None = None

    def _build_networks(self, configs: Mapping[str, Any], value_configs: Mapping[str, Any]
                        ) -> None:
        gen = torch.Generator().manual_seed(int(self._rng.integers(2**62)))
        lr = self.hp["lr"]
        for g, members in self.groups.items():
            head = self.heads[g]
            policy = make_arch(self.inputs[members[0]], head.dim, configs[g])
            value = make_arch(self._critic_input(g), 1, value_configs[g])
            self.nets.add(f"policy/{g}", EvolvableNetwork.build(policy, gen, self.device), lr)
            self.nets.add(f"value/{g}", EvolvableNetwork.build(value, gen, self.device), lr)
            if head.has_log_std:
                p = torch.nn.Parameter(torch.full((head.dim,), INIT_LOG_STD, device=self.device))
                self.log_std[g] = p
                if self.learner:
                    self.log_std_optim[g] = Adam([p], lr=lr)

    # -- what the value network reads (MAPPO overrides) --------------------------------------

    @property
    def spec(self) -> RolloutSpec:
        """On-policy; with the global state where the value networks read it (then rollouts
        must record it and fragments carry :data:`~distmarl.types.STATE_FIELDS`)."""
        return RolloutSpec(on_policy=True, global_state=self.state_space is not None)

    def _critic_input(self, group: str) -> InputSpec:
        """What ``value/<group>`` reads. IPPO: the agent's own observation."""
        return self.inputs[self.groups[group][0]]

    def _critic_inputs(self, group: str, obs: Mapping[str, Input],
                       state: torch.Tensor | None = None) -> list[Input]:
        """Value inputs of the group's agents (:meth:`_critic_input`; rows ``(..., )`` as
        ``obs``), from every agent's network input and (read when :attr:`spec`'s
        ``global_state``) the global state ``(..., state_dim)``. IPPO: each agent's own observation."""
        return [obs[a] for a in self.groups[group]]

    # -- acting ----------------------------------------------------------------------------

    def policy_net(self, group: str) -> EvolvableNetwork:
        """The policy network shared by ``group``'s agents."""
        return self.nets.online[f"policy/{group}"]

    def acting_network(self, agent: str) -> EvolvableNetwork:
        return self.policy_net(self.group_of[agent])

    def value_net(self, group: str) -> EvolvableNetwork:
        """The value network shared by ``group``'s agents."""
        return self.nets.online[f"value/{group}"]

    def values(self, group: str, critic_obs: Input) -> torch.Tensor:
        """``V`` in return units ``(B,)`` of critic inputs ``(B, critic_dim)`` (the value
        network's output, denormalised when ``value_norm`` is on)."""
        out = self.value_net(group)(critic_obs).squeeze(-1)
        return self.value_moments[group].denormalise(out) if self.hp["value_norm"] else out

    def act(self, obs: AgentObs, explore: bool = True,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """See :meth:`Algorithm.act`: explore samples the policy, otherwise the mean (Box,
        clipped to the bounds) / arg-max (Discrete) action. Masks come from dict observations
        (``{"observation", "action_mask"}``) or ``action_mask[agent]`` ``(num_envs, n)``;
        agents missing from ``obs`` get no action."""
        return self._act(obs, explore, action_mask, with_info=False)[0]

    def act_with_info(self, obs: AgentObs, explore: bool = True,
                      action_mask: Mapping[str, Any] | None = None,
                      state: np.ndarray | None = None
                      ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Actions (as :meth:`act`) and ``{"log_prob": {agent: float32 (num_envs,)}, "value":
        {agent: float32 (num_envs,)}}``: the behaviour policy's log-probability of the returned
        action and its value estimate ``V(obs)``, to be stored with the transition. ``state``
        ``(num_envs, state_dim)``: the env's global state, required when :attr:`spec`'s
        ``global_state``."""
        if self.spec.global_state and state is None:
            raise ValueError(f"this {self.name} reads the env's global state: pass "
                             f"state=infos['state'] (a vector env made with global_state=True)")
        return self._act(obs, explore, action_mask, with_info=True, state=state)

    @torch.no_grad()
    def _act(self, obs: AgentObs, explore: bool, action_mask: Mapping[str, Any] | None,
             with_info: bool, state: np.ndarray | None = None
             ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Each group's policy on its present agents; with info, its value network too."""
        x, masks = acting.observation_tensors(obs, self.readers, action_mask, self.device)
        actions: dict[str, np.ndarray] = {}
        log_probs: dict[str, np.ndarray] = {}
        for g, members in self.groups.items():
            present = [a for a in members if a in x]
            if present:
                action, log_prob = acting.sample_group(
                    self.policy_net(g), self.heads[g], self.log_std.get(g),
                    {a: x[a] for a in present}, {a: masks[a] for a in present}, explore,
                    self._torch_gen)
                actions.update(action)
                log_probs.update(log_prob)
        if not with_info:
            return actions, {}
        return actions, {"log_prob": log_probs, "value": self._values_of(x, state)}

    @torch.no_grad()
    def value_estimates(self, obs: AgentObs, state: np.ndarray | None = None
                        ) -> dict[str, np.ndarray]:
        """``V`` in return units, float32 ``(num_envs,)`` per agent present in ``obs`` (no
        action is sampled): the collector's ``next_value`` where an episode ended and at a
        fragment's end. ``state``: as for :meth:`act_with_info`."""
        return self._values_of(acting.observation_tensors(obs, self.readers, None,
                                                          self.device)[0], state)

    def _values_of(self, x: Mapping[str, Input], state: np.ndarray | None
                   ) -> dict[str, np.ndarray]:
        """Each group's value network on its agents present in ``x`` (the others' inputs, where
        the value network reads them, zero for absent agents)."""
        reads = self.spec.global_state and state is not None
        s = acting.state_tensor(state, self.device) if reads else None
        out: dict[str, np.ndarray] = {}
        for g, members in self.groups.items():
            present = [a for a in members if a in x]
            if present:
                full = acting.padded_obs(x, self.inputs, batch_size(x[present[0]]), self.device)
                inputs = dict(zip(members, self._critic_inputs(g, full, s)))
                joined = tree.concat([inputs[a] for a in present])
                out.update(acting.per_agent(self.values(g, joined), present))
        return out

    # -- learning --------------------------------------------------------------------------

    def learn(self, batch: Batch) -> dict[str, float]:
        """PPO on one time-major fragment (``ON_POLICY_FIELDS``, each ``(T, E, ...)``); see the
        module docstring. Metrics per group: ``loss/policy/<g>``, ``loss/value/<g>``,
        ``entropy/<g>``, ``approx_kl/<g>``, ``clip_fraction/<g>``, ``epochs/<g>``; and
        ``approx_kl``, the mean over groups."""
        stack = self._stack
        if stack is None or not stack.intact():
            require_learner(self)
            stack = self._stack = OnPolicyStack([self])
        return stack.learn([batch])[0]

    def learning_rows(self, batch: Batch) -> dict[str, GroupRows]:
        """Each agent group's rows of the fragment ``batch``, ready for the update epochs:
        GAE advantages and value targets (normalised, and the running moments updated, when
        ``value_norm`` is on)."""
        frag = clean_fragment(batch, self.readers,
                              {a: self.heads[g] for a, g in self.group_of.items()}, self.device)
        advantage, target = self._advantages(frag)
        if self.hp["value_norm"]:
            for g, members in self.groups.items():
                moments = self.value_moments[g]
                moments.update(torch.cat([target[a][frag[a].active] for a in members]))
                for a in members:
                    target[a] = moments.normalise(target[a])
        return {g: self._group_rows(g, frag, advantage, target) for g in self.groups}

    def stack_settings(self) -> dict[str, Any]:
        """See :meth:`Algorithm.stack_settings`: network shapes, Adam settings (the
        log-stds' too), and the epochs' shape (``update_epochs``, ``batch_size``)."""
        optims = {**self.nets.optim, **{f"log_std/{g}": o for g, o in self.log_std_optim.items()}}
        return {"networks": self.nets.arch(),
                "optimisers": {n: adam_settings(o) for n, o in optims.items()},
                "epochs": {h: self.hp[h] for h in SHARED_HP}}

    def learned(self, metrics: dict[str, float]) -> dict[str, float]:
        """Count one update whose groups' metrics (:meth:`group_metrics`) are ``metrics``;
        adds ``approx_kl``, the mean over groups."""
        metrics["approx_kl"] = float(np.mean([metrics[f"approx_kl/{g}"] for g in self.groups]))
        self.learn_steps += 1
        return metrics

    @staticmethod
    def group_metrics(group: str, out: Mapping[str, float]) -> dict[str, float]:
        """One group's figures of an update (:mod:`~distmarl.algorithms.onpolicy.stack`)
        under their metric names."""
        names = {"policy": "loss/policy", "value": "loss/value"}
        return {f"{names.get(k, k)}/{group}": v for k, v in out.items()}

    @torch.no_grad()
    def _advantages(self, frag: Mapping[str, AgentFragment]) -> tuple[Tensors, Tensors]:
        """GAE advantages and value targets per agent ``(T, E)``
        (:func:`~distmarl.algorithms.onpolicy.rows.fragment_advantages` on the behaviour
        policy's ``next_value``)."""
        return rows.fragment_advantages(frag, {a: f.next_value for a, f in frag.items()},
                                        self.hp["gamma"], self.hp["gae_lambda"])

    def _fragment_state(self, frag: Mapping[str, AgentFragment], field: str
                        ) -> torch.Tensor | None:
        """The fragment's ``state`` / ``next_state`` ``(T, E, state_dim)`` when the value
        networks read it (:func:`~distmarl.algorithms.onpolicy.rows.global_state`), else None."""
        return rows.global_state(frag, field, self.name) if self.spec.global_state else None

    def _group_rows(self, group: str, frag: Mapping[str, AgentFragment], advantage: Tensors,
                    target: Tensors) -> GroupRows:
        """The group's rows; ``target`` is what the value network's output is fitted to."""
        members = self.groups[group]
        critic = self._critic_inputs(group, {a: f.obs for a, f in frag.items()},
                                     self._fragment_state(frag, "state"))
        return rows.group_rows([frag[a] for a in members], critic,
                               [advantage[a] for a in members], [target[a] for a in members],
                               self.heads[group].dim, self.device)

    # -- weights and state -----------------------------------------------------------------

    def get_weights(self) -> dict[str, Any]:
        """Every network's architecture and weights (numpy copies): acting needs the policies
        and log-stds, the recorded ``value`` the value networks and ``value_norm/<group>``
        (layout: :mod:`~distmarl.algorithms.onpolicy.weights`), and the ``algorithm``'s name
        (a worker whose member changed algorithm rebuilds)."""
        return {**pack_weights(self.nets, self.log_std, self.value_moments),
                "algorithm": self.name}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load :meth:`get_weights` output (:func:`~distmarl.algorithms.onpolicy.weights.
        load_weights`: a network whose architecture differs is rebuilt, for acting)."""
        load_weights(self.nets, self.log_std, self.value_moments, weights, self.hp["lr"],
                     self.device)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers, log-stds, hyperparameters, counters and RNG states."""
        require_learner(self)
        return {
            "algorithm": self.name,
            "format": STATE_FORMAT,
            "agents": list(self.agents),
            "hp": dict(self.hp),
            "networks": self.nets.state_dict(),
            "log_std": {g: p.detach().clone() for g, p in self.log_std.items()},
            "log_std_optim": {g: copy.deepcopy(o.state_dict())
                              for g, o in self.log_std_optim.items()},
            "value_norm": {g: m.state_dict() for g, m in self.value_moments.items()},
            "learn_steps": self.learn_steps,
            "rng": self._rng_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict` output (possibly from another member, or another device),
        rebuilding networks whose architecture differs."""
        self._check_fits(state)
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"{self.name} state has format {state.get('format')}, this version "
                             f"reads format {STATE_FORMAT} (states from before value "
                             f"normalisation cannot be loaded)")
        self.nets.load_state_dict(state["networks"], self.device)
        with torch.no_grad():
            for g, p in self.log_std.items():
                p.copy_(state["log_std"][g])
        for g, opt in self.log_std_optim.items():
            opt.load_state_dict(copy.deepcopy(state["log_std_optim"][g]))
        self.hp = check_hp(self.name, state["hp"])
        for g, m in self.value_moments.items():
            m.load_state_dict(state["value_norm"][g])
        self.learn_steps = int(state["learn_steps"])
        self._load_rng_state(state["rng"])

    def clone(self) -> OnPolicyMultiAgent:
        """An independent copy with the same state (tensors are copied, never shared)."""
        new = type(self)(self.observation_spaces, self.action_spaces, self.net_config, self.hp,
                         self.device, seed=0, **self._extra_init())
        new.load_state_dict(self.state_dict())
        return new

    def _extra_init(self) -> dict[str, Any]:
        """Constructor arguments beyond the common ones, for :meth:`clone` (MAPPO: the state
        space)."""
        return {}

    # -- hyperparameters and evolution -----------------------------------------------------

    def set_hyperparameter(self, name: str, value: Any) -> None:
        """Change ``hp[name]``; ``lr`` goes straight into every optimiser's param groups, Adam's
        moment estimates kept (see ``OffPolicyMultiAgent.set_hyperparameter`` for why)."""
        value = check_hp_value(self.name, name, value)
        if name in FIXED_HP and value != self.hp[name]:
            raise ValueError(f"{name} is fixed when the learner is built (it shapes the value "
                             f"networks); it cannot be changed on a learner")
        self.hp[name] = value
        if name == "lr":
            self.nets.set_lr(list(self.nets.online), value)
            for opt in self.log_std_optim.values():
                for group in opt.param_groups:
                    group["lr"] = value

    def mutate_architecture(self, kind: str, rng: np.random.Generator,
                            preserve_output: bool = True) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_architecture` (policy and value
        networks of every group; log-stds are untouched)."""
        return mutate.mutate_architecture(self.nets, kind, rng, preserve_output,
                                             reference=self._reference())

    def mutate_activation(self, rng: np.random.Generator,
                          choices: Sequence[str] | None = None) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_activation`."""
        return mutate.mutate_activation(self.nets, rng, self._reference(), choices)

    def mutate_parameters(self, mutation_sd: float, rng: np.random.Generator) -> dict[str, Any]:
        """See :func:`distmarl.algorithms.common.mutate.mutate_parameters` (policies only)."""
        return mutate.mutate_parameters(self.nets, self.nets.names("policy"), mutation_sd, rng)

    def _reference(self) -> str:
        return f"policy/{next(iter(self.groups))}"

