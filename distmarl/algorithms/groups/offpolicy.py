"""MADDPG / MATD3 members updated as one stacked computation.

For ``K`` members whose networks have the same architectures (:func:`stackable`), every
network's parameters, target copy and Adam state are stacked along a leading member axis
``(K, ...)``; one update of all members is then one ``vmap`` of the member update over that
axis (``torch.func``): the critics' losses and gradients, a per-member, per-network gradient
clip, a stacked Adam step with each member's learning rate, the same for the actors (for the
members whose actor update is due), and the targets' Polyak averaging with each member's ``tau``.

The result equals the members' own updates (:meth:`OffPolicyMultiAgent.learn_batches`) one
after another, up to float rounding: each member's batch, hyperparameters and random draws
(Gumbel samples, MATD3's target smoothing) are its own, drawn from its own generator in the
order its own update would draw them.

A stack of one member stepped eagerly calls that member's own networks (whose parameters
alias its slot) instead of ``functional_call`` over stacked parameters, and steps its own Adam
(torch's fused kernel): the same arithmetic with fewer operations on the host.

Members whose batch sizes differ (``batch_size`` evolves) are stacked all the same: each batch
is padded to the largest with inactive rows, which the masked losses never count.

Each update is prepared on the host (the stacked batch, hyperparameters, each member's random
draws and whether its actor update is due) and then run as one step over tensors alone
(:meth:`StackedOffPolicy._step_all`), which ``mode`` runs: ``eager`` as it is, skipping the
actors' part when no member's actor update is due; ``static`` the same computation a CUDA
graph would capture (the actors' part always, masked per member), run eagerly; ``graph``
(CUDA) captured once per call and replayed (:mod:`~distmarl.algorithms.groups.capture`).

Shapes: ``K`` members, ``B`` rows per batch (the largest of the call's), per agent observations
``(K, B, obs_dim)``, actions ``(K, B, act_dim)``, scalars ``(K, B, 1)``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch.func import functional_call

from distmarl import tree
from distmarl.algorithms.base import Batch
from distmarl.algorithms.common.adam import adam_steps
from distmarl.algorithms.common.metrics import to_floats
from distmarl.algorithms.common.observations import joint_tensor
from distmarl.algorithms.common.space_tensors import BoxCodec, require_batch_keys
from distmarl.algorithms.groups.adam import (
    Params,
    StackedAdam,
    adam_step,
    clip_per_member,
    per_param,
)
from distmarl.algorithms.groups.capture import EagerStep, GraphStep, StepRunner
from distmarl.algorithms.groups.slots import Slots
from distmarl.algorithms.groups.trees import member_grads, stack_tree
from distmarl.algorithms.offpolicy.batch import clean_batch, masked_mean, masked_mse, td_target
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.types import OFF_POLICY_FIELDS

#: each member's hyperparameters the update reads, as ``(K,)`` tensors
UPDATE_HP = ("gamma", "tau", "lr_actor", "lr_critic", "max_grad_norm", "actor_reg")

Tree = dict[str, Any]
Mode = Literal["eager", "static", "graph"]


def stackable(members: Sequence[OffPolicyMultiAgent]) -> str | None:
    """Why ``members`` cannot be updated as one stack (None: they can): one algorithm, one
    device, the same agents, networks of the same architectures, plain Adam optimisers with
    the same betas and eps."""
    if not members:
        return "no members"
    first = members[0]
    for i, m in enumerate(members):
        if type(m) is not type(first):
            return f"member {i} is {m.name}, member 0 is {first.name}"
        if m.device != first.device:
            return f"member {i} is on {m.device}, member 0 on {first.device}"
        if list(m.agents) != list(first.agents):
            return f"member {i} has agents {list(m.agents)}, member 0 {list(first.agents)}"
        if m.nets.arch() != first.nets.arch():
            return f"member {i}'s networks differ in shape from member 0's"
        for name, opt in m.nets.optim.items():
            group, ref = opt.param_groups[0], first.nets.optim[name].param_groups[0]
            if len(opt.param_groups) != 1 or group["betas"] != ref["betas"] \
                    or group["eps"] != ref["eps"] or group["weight_decay"] or group["amsgrad"]:
                return f"member {i}'s optimiser of {name} is not a plain Adam like member 0's"
    return None


class StackedOffPolicy:
    """One stacked update of ``members`` (MADDPG or MATD3, see :func:`stackable`); their own
    objects hold the result after each :meth:`learn_batches` call."""

    def __init__(self, members: Sequence[OffPolicyMultiAgent], mode: Mode = "eager") -> None:
        problem = stackable(members)
        if problem is not None:
            raise ValueError(f"these members cannot be stacked: {problem}")
        if mode not in ("eager", "static", "graph"):
            raise ValueError(f"mode {mode!r}: one of eager, static, graph")
        self.mode = mode
        self.members = list(members)
        self.ref = self.members[0]
        self.agents = list(self.ref.agents)
        self.roles = self.ref.CRITIC_ROLES
        self.device = self.ref.device
        self.templates = {n: copy.deepcopy(net).to("meta")
                          for n, net in self.ref.nets.online.items()}
        self.actors = [f"actor/{a}" for a in self.agents]
        self.critics = [f"{r}/{a}" for r in self.roles for a in self.agents]
        self._critic_grads = member_grads(self._critic_loss)
        self._actor_grads = member_grads(self._actor_loss)
        #: a stack of one stepped eagerly runs its member's own networks (no functional_call)
        self._own = self.ref.nets if len(self.members) == 1 and mode == "eager" else None
        self.slots = Slots(self.members, self._member_tensors)
        self.state = self._state()

    # -- the public call -------------------------------------------------------------------

    def learn_batches(self, batches: Sequence[Sequence[Batch]],
                      weights: Sequence[Sequence[torch.Tensor]] | None = None
                      ) -> list[tuple[list[dict[str, float]], np.ndarray | None]]:
        """``batches[k]``: member ``k``'s batches, one update each (every member the same
        number; a member's batch size may differ from another's: each is padded to the largest
        with inactive rows, which no loss counts); ``weights[k]`` their importance weights
        ``(B,)`` (prioritised replay) or None. Per member, as its own ``learn_batches`` returns: each
        update's metrics and, with weights, the rows' new priorities."""
        counts = {len(b) for b in batches}
        if len(batches) != len(self.members) or len(counts) != 1:
            raise ValueError(f"one list of batches per member ({len(self.members)}), all of one "
                             f"length; got lengths {[len(b) for b in batches]}")
        state = self.state
        runner = self._runner()
        hp = self._hp()
        metrics: list[list[dict[str, torch.Tensor]]] = [[] for _ in self.members]
        priorities: list[list[torch.Tensor]] = [[] for _ in self.members]
        for u in range(counts.pop()):
            inputs, sizes, due = self._inputs([b[u] for b in batches], hp,
                                              None if weights is None else [ws[u] for ws in weights])
            out = runner(state, inputs)
            for k in range(len(self.members)):
                metrics[k].append({f"loss/{n}": v[k] for n, v in out["critic"].items()})
                if due[k]:
                    metrics[k][-1].update({f"loss/{n}": v[k] for n, v in out["actor"].items()})
                if "priorities" in out:
                    priorities[k].append(out["priorities"][k, :sizes[k]].reshape(-1))
        return [(to_floats(ms), torch.cat(ps).cpu().numpy() if ps else None)
                for ms, ps in zip(metrics, priorities, strict=True)]

    def _runner(self) -> StepRunner:
        if self.mode == "graph":
            return GraphStep(lambda state, x: self._step_all(state, x, skip_idle=False),
                             self.device)
        skip = self.mode == "eager"
        return EagerStep(lambda state, x: self._step_all(state, x, skip_idle=skip))

    # -- the members' slots -----------------------------------------------------------------

    def intact(self) -> bool:
        """Whether every member still lives in its slot (see :class:`Slots`): False after a
        member's networks or optimiser states were replaced, when the stack must be built
        again."""
        return self.slots.intact()

    def _member_tensors(self, m: OffPolicyMultiAgent) -> dict[tuple[str, str, str], torch.Tensor]:
        """Member ``m``'s parameters, targets and Adam state (created where a parameter has
        none yet), by ``(kind, network, parameter)``."""
        out: dict[tuple[str, str, str], torch.Tensor] = {}
        for n in self.templates:
            opt = m.nets.optim[n]
            for pname, p in m.nets.online[n].named_parameters():
                out["online", n, pname] = p
                state = opt.state_of(p)
                out["m", n, pname] = state["exp_avg"]
                out["v", n, pname] = state["exp_avg_sq"]
                out["step", n, pname] = state["step"]
            for pname, p in m.nets.target[n].named_parameters():
                out["target", n, pname] = p
        return out

    def _state(self) -> Tree:
        """The step's view of the slots: parameters, targets and Adam state per network."""
        by: dict[str, dict[str, dict[str, torch.Tensor]]] = {}
        for (kind, n, pname), x in self.slots.stacked.items():
            by.setdefault(kind, {}).setdefault(n, {})[pname] = x
        adam = {}
        for n in self.templates:
            group = self.ref.nets.optim[n].param_groups[0]
            adam[n] = StackedAdam(by["m"][n], by["v"][n], by["step"][n],
                                  (float(group["betas"][0]), float(group["betas"][1])),
                                  float(group["eps"]))
        return {"online": by["online"], "target": by["target"], "adam": adam}

    # -- one update of every member --------------------------------------------------------

    def _inputs(self, batches: Sequence[Batch], hp: dict[str, torch.Tensor],
                weights: Sequence[torch.Tensor] | None
                ) -> tuple[Tree, list[int], list[bool]]:
        """One update's inputs, prepared on the host: the stacked batch (with the importance
        weights), ``hp``, each member's random draws in its own update's order and the mask of
        members whose actor update is due; each member's own rows and its due flag. Counts the
        update in each member's ``learn_steps``."""
        b, sizes = self._stacked_batch(batches)
        rows = max(sizes)
        if weights is not None:
            b["weights"] = torch.stack([_pad(x.reshape(-1, 1).to(self.device), rows)
                                        for x in weights])
        due = [self._actor_due(m) for m in self.members]
        inputs = {"batch": b, "hp": hp,
                  "due": torch.tensor(due, device=self.device),
                  "target_noise": self._draws(sizes, self._target_noise),
                  "policy_noise": self._draws(sizes, self._policy_noise, due,
                                              every_member=self.mode != "eager")}
        for m in self.members:
            m.learn_steps += 1
        return inputs, sizes, due

    def _step_all(self, state: Tree, x: Tree, skip_idle: bool) -> Tree:
        """One update of every member from its prepared inputs ``x``, tensors alone (a CUDA
        graph can capture it): the critics, then the due members' actors and targets. The
        critics' and actors' losses ``(K,)`` per network and, with importance weights, each
        row's priority ``(K, B)``. ``skip_idle``: leave out the actors' part when no member is
        due (a decision on the host)."""
        b, hp, due = x["batch"], x["hp"], x["due"]
        grads, (losses, td_sum) = self._critic_grads(
            self._nets(state, "online", self.critics),
            self._nets(state, "target", list(self.templates)), b, hp, x["target_noise"])
        self._step(state, self.critics, grads, hp["lr_critic"], hp["max_grad_norm"], None)
        out: Tree = {"critic": {n: v.detach() for n, v in losses.items()}, "actor": {}}
        if not skip_idle or bool(due.any()):
            actor_grads, actor_losses = self._actor_grads(
                self._nets(state, "online", self.actors),
                self._nets(state, "online", self.critics), b, hp, x["policy_noise"])
            self._step(state, self.actors, actor_grads, hp["lr_actor"], hp["max_grad_norm"],
                       due)
            self._soft_update(state, hp["tau"], due)
            out["actor"] = {n: v.detach() for n, v in actor_losses.items()}
        if "weights" in b:
            critics = torch.cat([b["active"][a] for a in self.agents],
                                dim=-1).sum(-1, keepdim=True)
            out["priorities"] = td_sum / (critics * len(self.roles)).clamp_min(1.0)
        return out

    def _nets(self, state: Tree, kind: str, names: Sequence[str]) -> Tree:
        """Networks ``names`` of ``kind`` (online or target) as the losses take them: stacked
        parameters, or a stack of one's own modules (which alias its slot)."""
        if self._own is not None:
            own = self._own.online if kind == "online" else self._own.target
            return {n: own[n] for n in names}
        return {n: state[kind][n] for n in names}

    def _stacked_batch(self, batches: Sequence[Batch]) -> tuple[Tree, list[int]]:
        """The members' batches joined row-wise and cleaned at once (:func:`clean_batch`'s
        rules act row by row, so this is each batch cleaned alone, with one launch per field
        rather than one per member), then stacked field by field: a reshape where every batch
        has the same rows, else each padded to the largest with inactive rows (zeros; every
        action legal). Each member's own number of rows."""
        for x in batches:
            require_batch_keys(x, OFF_POLICY_FIELDS, self.agents)
        sizes = [len(x["active"][self.agents[0]]) for x in batches]
        clean = clean_batch(tree.concat(batches), self.ref.readers, self.ref.codecs, self.device)
        fields = ("obs", "action", "reward", "next_obs", "terminated", "active", "n_steps",
                  "mask", "next_mask")
        stacked = {f: tree.map(lambda x: _split(x, sizes), getattr(clean, f))
                   for f in fields}
        return tree.prune(stacked), sizes

    def _hp(self) -> dict[str, torch.Tensor]:
        names = UPDATE_HP + (("policy_noise", "noise_clip") if "policy_noise" in self.ref.hp
                             else ())
        return {h: torch.tensor([float(m.hp[h]) for m in self.members], device=self.device)
                for h in names}

    def _actor_due(self, m: OffPolicyMultiAgent) -> bool:
        return bool(m._actor_update_due())

    # -- random draws, each member from its own generator -----------------------------------

    def _draws(self, sizes: Sequence[int], draw: Callable[[OffPolicyMultiAgent, str, int], Any],
               due: Sequence[bool] | None = None, every_member: bool = False) -> Tree:
        """``draw(member, agent, rows)`` for every member (agents in order, as the member's
        own update draws, for its own ``sizes[k]`` rows, padded) stacked per agent; members
        not ``due`` draw nothing (zeros). ``every_member``: a draw stays in the tree even when
        no member is due (zeros for all), so that every update's inputs have one shape."""
        per_member: list[dict[str, Any]] = []
        for k, m in enumerate(self.members):
            if due is not None and not due[k]:
                per_member.append({})
                continue
            per_member.append({a: tree.map(lambda x: None if x is None else _pad(x, max(sizes)),
                                              draw(m, a, sizes[k]))
                               for a in self.agents})
        out = tree.prune({a: stack_tree([d.get(a) for d in per_member]) for a in self.agents})
        if every_member:  # no member due: zeros where the draws would be
            for a in self.agents:
                codec = self.ref.codecs[a]
                if a not in out and codec.draws:
                    out[a] = torch.zeros(len(self.members), max(sizes), codec.dim,
                                         device=self.device)
        return out

    def _target_noise(self, m: OffPolicyMultiAgent, agent: str, rows: int) -> Any:
        """The target action's draws: the codec's, then MATD3's smoothing noise (Box)."""
        codec = m.codecs[agent]
        shape = torch.Size((rows, codec.dim))
        own = codec.noise(shape, m._torch_gen, self.device)
        smooth = None
        if "policy_noise" in m.hp and isinstance(codec, BoxCodec) and m.hp["policy_noise"] != 0:
            smooth = torch.randn(shape, generator=m._torch_gen, device=self.device)
        return {"codec": own, "smooth": smooth}

    def _policy_noise(self, m: OffPolicyMultiAgent, agent: str, rows: int) -> Any:
        codec = m.codecs[agent]
        return codec.noise(torch.Size((rows, codec.dim)), m._torch_gen, self.device)

    # -- one member's losses (vmapped over the members) -------------------------------------

    def _call(self, name: str, params: Params | torch.nn.Module, *args: Any) -> torch.Tensor:
        if isinstance(params, torch.nn.Module):
            return params(*args)
        return functional_call(self.templates[name], params, args)

    def _joint(self, actions: Mapping[str, torch.Tensor], active: Mapping[str, torch.Tensor]
               ) -> torch.Tensor:
        return torch.cat([actions[a] * active[a] for a in self.agents], dim=-1)

    def _target_action(self, target: Tree, agent: str, b: Tree, noise: Tree,
                       hp: Mapping[str, torch.Tensor]) -> torch.Tensor:
        codec = self.ref.codecs[agent]
        u = codec.target_with(self._call(f"actor/{agent}", target[f"actor/{agent}"],
                                         b["next_obs"][agent]),
                              noise.get("codec"), b["next_mask"].get(agent))
        if "smooth" not in noise:
            return u
        clip = hp["noise_clip"]
        smooth = torch.maximum(torch.minimum(noise["smooth"] * hp["policy_noise"], clip), -clip)
        return (u + smooth).clamp(-1.0, 1.0)

    def _critic_loss(self, critics: Tree, target: Tree, b: Tree, hp: Mapping[str, torch.Tensor],
                     noise: Tree
                     ) -> tuple[torch.Tensor, tuple[dict[str, torch.Tensor], torch.Tensor]]:
        """One member's critic losses (their sum is differentiated) and TD-error sum
        ``(B, 1)``; ``b["weights"]``, where present, scales each row's squared error."""
        joint = self.ref.joint
        joint_obs = joint_tensor(b["obs"], self.agents, joint)
        joint_act = self._joint(b["action"], b["active"])
        losses: dict[str, torch.Tensor] = {}
        td_sum = torch.zeros_like(b["active"][self.agents[0]])
        with torch.no_grad():  # the TD targets: no graph through the target networks
            next_obs = joint_tensor(b["next_obs"], self.agents, joint)
            next_act = self._joint({a: self._target_action(target, a, b, noise.get(a, {}), hp)
                                    for a in self.agents}, b["active"])
            ys = {a: td_target(b["reward"][a], b["terminated"][a],
                               torch.stack([self._call(f"{r}/{a}", target[f"{r}/{a}"], next_obs,
                                                       next_act)
                                            for r in self.roles]).min(dim=0).values,
                               hp["gamma"], b["n_steps"][a]) for a in self.agents}
        for a in self.agents:
            y = ys[a]
            for r in self.roles:
                q = self._call(f"{r}/{a}", critics[f"{r}/{a}"], joint_obs, joint_act)
                losses[f"{r}/{a}"] = masked_mse(q, y, b["active"][a], b.get("weights"))
                td_sum = td_sum + (q.detach() - y).abs() * b["active"][a]
        return torch.stack(list(losses.values())).sum(), (losses, td_sum)

    def _actor_loss(self, actors: Tree, critics: Tree, b: Tree, hp: Mapping[str, torch.Tensor],
                    noise: Tree) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        joint_obs = joint_tensor(b["obs"], self.agents, self.ref.joint)
        losses: dict[str, torch.Tensor] = {}
        for a in self.agents:
            out = self._call(f"actor/{a}", actors[f"actor/{a}"], b["obs"][a])
            own = self.ref.codecs[a].policy_with(out, noise.get(a), b["mask"].get(a))
            actions = self._joint({**b["action"], a: own}, b["active"])
            critic = critics[f"critic/{a}"]  # not differentiated: a module is left as is
            if not isinstance(critic, torch.nn.Module):
                critic = {k: v.detach() for k, v in critic.items()}
            q = self._call(f"critic/{a}", critic, joint_obs, actions)
            reg = masked_mean(out.pow(2).mean(dim=-1, keepdim=True), b["active"][a])
            losses[f"actor/{a}"] = -masked_mean(q, b["active"][a]) + hp["actor_reg"] * reg
        return torch.stack(list(losses.values())).sum(), losses

    # -- optimiser steps and targets -------------------------------------------------------

    @torch.no_grad()
    def _step(self, state: Tree, names: Sequence[str], grads: Tree, lr: torch.Tensor,
              max_norm: torch.Tensor, due: torch.Tensor | None) -> None:
        """Each network's gradients clipped to each member's ``max_grad_norm`` (0: no clip),
        then a stacked Adam step of the ``due`` members (None: all)."""
        clip_per_member([list(grads[n].values()) for n in names], max_norm)
        if self._own is not None:  # its member's own Adam (torch's fused kernel) on its slot
            adam_steps([self._own.optim[n] for n in names],
                       [[g[0] for g in grads[n].values()] for n in names])
            return
        adam_step([state["adam"][n] for n in names], [state["online"][n] for n in names],
                  [grads[n] for n in names], lr, due)

    @torch.no_grad()
    def _soft_update(self, state: Tree, tau: torch.Tensor, due: torch.Tensor) -> None:
        """``target <- target + tau * (online - target)`` for the ``due`` members (the
        others' targets stay exactly: a step of 0)."""
        targets = [t for n in self.templates for t in state["target"][n].values()]
        onlines = [state["online"][n][p] for n in self.templates for p in state["target"][n]]
        weight = (tau * due.to(tau.dtype)).expand(len(targets), -1)
        torch._foreach_lerp_(targets, onlines, per_param(weight, targets))


def _pad(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` ``(B, ...)`` with ``rows - B`` more rows: zeros, or True for a bool mask (every
    action legal, so a padded row's logits stay finite)."""
    if x.shape[0] == rows:
        return x
    fill = torch.ones if x.dtype == torch.bool else torch.zeros
    return torch.cat([x, fill((rows - x.shape[0], *x.shape[1:]), dtype=x.dtype,
                              device=x.device)])


def _split(x: torch.Tensor | None, sizes: Sequence[int]) -> torch.Tensor | None:
    """``(sum(sizes), ...)`` rows as ``(K, max(sizes), ...)``: member ``k``'s rows padded
    (:func:`_pad`) and stacked, or only reshaped where all sizes are one."""
    if x is None:
        return None
    if len(set(sizes)) == 1:
        return x.reshape(len(sizes), sizes[0], *x.shape[1:])
    rows = max(sizes)
    return torch.stack([_pad(part, rows) for part in torch.split(x, list(sizes))])
