"""The MADDPG / MATD3 update: members stacked, networks run in banks.

A stack holds ``K`` members of one algorithm and network shapes
(:func:`~distmarl.algorithms.common.stacking.stack_problem`); a single
member is a stack of one, and this is the only update there is. Each member's parameters,
target copies and Adam state live in the stack's storage (:class:`Slots`: the member's own
tensors alias their rows), laid out in banks (:mod:`~distmarl.algorithms.offpolicy.banks`):
every member's like networks, and within a member the agents' like networks, run as one
batched network. One update of every member is then one pass over tensors alone: the TD
targets, the critics' losses, a gradient clip per member and network, an Adam step with each
member's learning rate, the same for the actors of the members whose actor update is due, and
the targets' Polyak averaging with each member's ``tau`` (those steps:
:mod:`~distmarl.algorithms.offpolicy.steps`).

Each member's batch and hyperparameters are its own
(:mod:`~distmarl.algorithms.offpolicy.prepare`); the random draws (Gumbel samples, MATD3's
target smoothing) of every member come from one call per update
(:mod:`~distmarl.algorithms.offpolicy.draws`).

MADDPG and MATD3 differ by declared settings of the algorithm class: ``CRITIC_ROLES`` (twin
critics: the bootstrap is their minimum), ``SMOOTHED_TARGETS`` (clipped Gaussian noise on Box
target actions) and ``actor_update_due()`` (delayed actor and target updates).

Each update is prepared on the host (:meth:`OffPolicyStack._inputs`) and then run as one step
over tensors (:meth:`OffPolicyStack._step_all`), which ``mode`` runs
(:mod:`~distmarl.algorithms.common.capture`; by default the members' ``step`` setting):
``eager`` as it is, skipping the actors' part when no member's actor update is due;
``static`` the computation a CUDA graph would capture (the actors' part always, masked per
member), run eagerly; ``compiled`` that computation through ``torch.compile``; ``graph``
(CUDA) captured once per input shape and replayed. The runner is kept with the stack, so a
compilation or capture is made once per stack and shape; compiled and captured steps pad
their batches to a few sizes (:func:`~distmarl.algorithms.offpolicy.prepare.bucket`), so that
an evolved ``batch_size`` seldom makes a new shape.

Shapes: ``K`` members, ``B`` rows per batch (the largest of the call's); per agent
observations ``(K, B, obs_dim)``, actions ``(K, B, act_dim)``, scalars ``(K, B, 1)``; a
bank's inputs and outputs ``(K * R * n, B, ...)`` (:class:`Bank`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from distmarl.algorithms.base import Batch
from distmarl.algorithms.common.capture import MODES, Mode, StepRunner, runner
from distmarl.algorithms.common.observations import joint_tensor
from distmarl.algorithms.common.slots import Slots
from distmarl.algorithms.common.stacked_adam import StackedAdam
from distmarl.algorithms.common.stacking import stack_problem
from distmarl.algorithms.offpolicy.banks import (
    Bank,
    plan_banks,
    repeat_rows,
    rows,
    stack_agents,
)
from distmarl.algorithms.offpolicy.batch import masked_mean, masked_mse, td_target
from distmarl.algorithms.offpolicy.draws import DrawPlan, Draws, StackDraws
from distmarl.algorithms.offpolicy.prepare import (
    Result,
    joined,
    read_results,
    split,
    stacked_batch,
)
from distmarl.algorithms.offpolicy.steps import BankSteps
from distmarl.networks.banked import bank_forward

if TYPE_CHECKING:  # the members' class steps its own members through this module
    from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent

#: each member's hyperparameters the update reads, as ``(K,)`` tensors
UPDATE_HP = ("gamma", "tau", "lr_actor", "lr_critic", "max_grad_norm", "actor_reg")
#: MATD3's target smoothing
SMOOTHING_HP = ("policy_noise", "noise_clip")

Tree = dict[str, Any]


class OffPolicyStack:
    """The update of ``members`` (MADDPG or MATD3, see :func:`stack_problem`); their own objects
    hold the result after each :meth:`learn_batches` call."""

    def __init__(self, members: Sequence[OffPolicyMultiAgent], mode: Mode | None = None,
                 draws: Draws | None = None) -> None:
        problem = stack_problem(members)
        if problem is not None:
            raise ValueError(f"these members cannot be stacked: {problem}")
        self.members = list(members)
        self.ref = self.members[0]
        mode = self.ref.step.mode if mode is None else mode
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.mode: Mode = mode
        self.agents = list(self.ref.agents)
        self.smoothed = type(self.ref).SMOOTHED_TARGETS
        self.plan = DrawPlan(self.agents, self.ref.codecs, self.smoothed)
        #: where the updates' uniform draws come from (default: the stack's generator)
        self.draws: Draws = StackDraws(self.device) if draws is None else draws
        self.banks = plan_banks(self.ref.nets.online, self.agents, self.ref.CRITIC_ROLES)
        self.actor_banks = [b for b in self.banks if b.kind == "actor"]
        self.critic_banks = [b for b in self.banks if b.kind == "critic"]
        self.slots = Slots(self.members, self._member_tensors)
        self.state = self._state()
        group = self.ref.nets.optim[self.banks[0].nets[0]].param_groups[0]
        self.steps = BankSteps(self.banks, self.state, len(self.members), mode,
                               bool(group["fused"]))
        self._run = self._runner()
        #: what :meth:`intact` compares (the objects themselves are kept, so their ids stay
        #: theirs)
        self._built_from = [self._holders(m) for m in self.members]
        self._kept_holders = [(m.nets.online.copy(), m.nets.target.copy(), m.nets.optim.copy(),
                               [o.state for o in m.nets.optim.values()]) for m in self.members]

    # -- the public call -------------------------------------------------------------------

    def learn_batches(self, batches: Sequence[Sequence[Batch]],
                      weights: Sequence[Sequence[torch.Tensor]] | None = None
                      ) -> list[Result]:
        """``batches[k]``: member ``k``'s batches, one update each (every member the same
        number; a member's batch size may differ from another's); ``weights[k]`` their
        importance weights ``(B,)`` (prioritised replay) or None. Per member: each update's
        metrics (``loss/<network>``) and, with weights, the rows' new priorities (each row's
        absolute TD error averaged over the critics of the agents active on it)."""
        counts = {len(b) for b in batches}
        if len(batches) != len(self.members) or len(counts) != 1:
            raise ValueError(f"one list of batches per member ({len(self.members)}), all of one "
                             f"length; got lengths {[len(b) for b in batches]}")
        hp = self._hp()
        if self.plan.width:
            self.draws.start_call(self.members)
        outs, dues, sizes = [], [], []
        for u in range(counts.pop()):
            inputs, size, due = self._inputs([b[u] for b in batches], hp,
                                             None if weights is None else [w[u] for w in weights])
            outs.append(self._run(self.state, inputs))
            dues.append(due)
            sizes = size
        return read_results(outs, dues, sizes, self.banks, self.agents, len(self.members))

    def intact(self) -> bool:
        """Whether every member still lives in its slot (see :class:`Slots`): False after a
        member's networks or optimiser states were replaced, when the stack must be built
        again. Checked cheaply, as it is before every call: the objects that hold a member's
        tensors (its networks, their target copies, optimisers and optimiser states) are
        still the ones the stack was built from (a mutation or a loaded state replaces
        them), and each network's first tensors still point at their rows (a stack that
        takes a member in points all of them elsewhere)."""
        try:
            return [self._holders(m) for m in self.members] == self._built_from
        except KeyError:  # a network the stack holds is gone
            return False

    def _holders(self, m: OffPolicyMultiAgent) -> list[int]:
        """What :meth:`intact` compares for member ``m``: ids of the objects holding its
        tensors, and where each network's first parameters and moment live."""
        out = []
        for bank in self.banks:
            for n in bank.nets:
                online, target, opt = m.nets.online[n], m.nets.target[n], m.nets.optim[n]
                first = next(iter(online.parameters()))
                out += [id(online), id(target), id(opt), id(opt.state), first.data_ptr(),
                        next(iter(target.parameters())).data_ptr(),
                        opt.state[first]["exp_avg"].data_ptr() if first in opt.state else 0]
        return out

    def _runner(self) -> StepRunner:
        """The runner of :attr:`mode`, counting its builds in the members' log."""
        return runner(self.mode, lambda state, x: self._step_all(state, x, skip_idle=True),
                      lambda state, x: self._step_all(state, x, skip_idle=False), self.device,
                      self.name, self.ref.step.log)

    @property
    def name(self) -> str:
        """The stack in messages: its algorithm, members and device."""
        k = len(self.members)
        return f"the {self.ref.name} stack of {k} member{'s' if k > 1 else ''} on {self.device}"

    @property
    def device(self) -> torch.device:
        return self.ref.device

    # -- the members' slots -----------------------------------------------------------------

    def _member_tensors(self, m: OffPolicyMultiAgent) -> dict[tuple[str, int, str], list[torch.Tensor]]:
        """Member ``m``'s parameters, targets and Adam state (created where a parameter has
        none yet) by ``(kind, bank, parameter)``, each a list over the bank's networks."""
        out: dict[tuple[str, int, str], list[torch.Tensor]] = {}
        for i, bank in enumerate(self.banks):
            for n in bank.nets:
                opt = m.nets.optim[n]
                for pname, p in m.nets.online[n].named_parameters():
                    state = opt.state_of(p)
                    for kind, x in (("online", p), ("m", state["exp_avg"]),
                                    ("v", state["exp_avg_sq"]), ("step", state["step"])):
                        out.setdefault((kind, i, pname), []).append(x)
                for pname, p in m.nets.target[n].named_parameters():
                    out.setdefault(("target", i, pname), []).append(p)
        return out

    def _state(self) -> Tree:
        """The step's view of the slots, per bank: parameters, targets and Adam state."""
        by: dict[str, list[dict[str, torch.Tensor]]] = {
            kind: [{} for _ in self.banks] for kind in ("online", "target", "m", "v", "step")}
        for (kind, i, pname), x in self.slots.stacked.items():
            by[kind][i][pname] = x
        adam = []
        for i, bank in enumerate(self.banks):
            group = self.ref.nets.optim[bank.nets[0]].param_groups[0]
            adam.append(StackedAdam(by["m"][i], by["v"][i], by["step"][i],
                                    (float(group["betas"][0]), float(group["betas"][1])),
                                    float(group["eps"])))
        for ps in by["online"]:  # the leaves every step differentiates
            for p in ps.values():
                p.requires_grad_(True)
        return {"online": by["online"], "target": by["target"], "adam": adam}

    # -- one update of every member, prepared on the host ----------------------------------

    def _hp(self) -> Tree:
        """Each member's hyperparameters ``(K,)``, and per bank the rows' learning rate, clip
        norm and ``tau`` ``(K * R * n,)``: fixed for a call."""
        names = UPDATE_HP + (SMOOTHING_HP if self.smoothed else ())
        hp: Tree = {h: torch.tensor([float(m.hp[h]) for m in self.members], device=self.device)
                    for h in names}
        hp["rows"] = tuple({"lr": rows(hp[f"lr_{bank.kind}"], bank),
                            "max_grad_norm": rows(hp["max_grad_norm"], bank),
                            "tau": rows(hp["tau"], bank)} for bank in self.banks)
        self.steps.set_call([m.hp for m in self.members])
        return hp

    def _inputs(self, batches: Sequence[Batch], hp: dict[str, torch.Tensor],
                weights: Sequence[torch.Tensor] | None) -> tuple[Tree, list[int], list[bool]]:
        """One update's inputs: the stacked batch (with the importance weights), ``hp``, the
        uniform draws of every member ``(K, B, width)`` (none where nothing draws) and the
        mask of members whose actor update is due; each member's own rows and its due flag.
        Counts the update in each member's ``learn_steps``."""
        b, sizes, rows_ = stacked_batch(batches, self.agents, self.ref.readers,
                                        self.ref.codecs, self.device,
                                        bucketed=self.mode in ("compiled", "graph"))
        if weights is not None:
            b["weights"] = split(joined(weights).reshape(-1, 1).to(self.device), sizes, rows_)
        due = [m.actor_update_due() for m in self.members]
        self.steps.set_due(due)
        inputs = {"batch": b, "hp": hp, "due": torch.tensor(due, device=self.device)}
        if self.plan.width:
            inputs["uniform"] = self.draws.uniform((len(self.members), rows_, self.plan.width),
                                                   self.device)
        for m in self.members:
            m.learn_steps += 1
        return inputs, sizes, due

    # -- one update of every member, tensors alone -----------------------------------------

    def _step_all(self, state: Tree, x: Tree, skip_idle: bool) -> Tree:
        """One update of every member from its prepared inputs ``x`` (a CUDA graph can
        capture it): the critics, then the due members' actors and targets. Per bank, the
        critics' losses ``(K, R, n)`` and the actors' ``(K, n)``; with importance weights,
        each row's priority ``(K, B, 1)``. ``skip_idle``: leave out the actors' part when no
        member is due (a decision on the host)."""
        b, hp, due = x["batch"], x["hp"], x["due"]
        target_noise, policy_noise = self.plan.split(x["uniform"]) if "uniform" in x else ({}, {})
        out: Tree = {"critic": (), "actor": ()}
        joint_obs = joint_tensor(b["obs"], self.agents, self.ref.joint)
        acted = {a: b["action"][a] * b["active"][a] for a in self.agents}  # joint parts
        td_sum = self._critic_phase(state, b, hp, target_noise, joint_obs, acted, out)
        if not skip_idle or bool(due.any()):
            self._actor_phase(state, b, hp, policy_noise, due, joint_obs, acted, out)
            self.steps.soft_update(state, hp["rows"], due)
        if "weights" in b:
            critics = torch.cat([b["active"][a] for a in self.agents],
                                dim=-1).sum(-1, keepdim=True)
            out["priorities"] = td_sum / (critics * len(self.ref.CRITIC_ROLES)).clamp_min(1.0)
        return out

    def _target_actions(self, state: Tree, b: Tree, noise: Tree, hp: Tree) -> torch.Tensor:
        """The target actors' joint critic-form action on the next observations
        ``(K, B, sum act_dim)`` (inactive agents' zeros)."""
        acts: dict[str, torch.Tensor] = {}
        for bank in self.actor_banks:
            i = bank.position
            out = bank_forward(bank.template, state["target"][i],
                               stack_agents(b["next_obs"], bank.agents))
            for j, a in enumerate(bank.agents):
                draws = noise.get(a, {})
                u = self.ref.codecs[a].target_with(_agent_rows(out, bank, j),
                                                   draws.get("codec"), b["next_mask"].get(a))
                if "smooth" in draws:
                    u = smoothed(u, draws["smooth"], hp["policy_noise"].view(-1, 1, 1),
                                 hp["noise_clip"].view(-1, 1, 1))
                acts[a] = u
        return self._joint(acts, b["active"])

    def _critic_phase(self, state: Tree, b: Tree, hp: Tree, noise: Tree, joint_obs: Any,
                      acted: dict[str, torch.Tensor], out: Tree) -> torch.Tensor:
        """TD targets, critic losses, one clipped Adam step of every critic; the TD-error
        sum over critics ``(K, B, 1)``. ``acted``: each agent's batch action, zeros where it
        is inactive (the parts of the joint action)."""
        joint_act = torch.cat([acted[a] for a in self.agents], dim=-1)
        with torch.no_grad():
            next_obs = joint_tensor(b["next_obs"], self.agents, self.ref.joint)
            next_act = self._target_actions(state, b, noise, hp)
        losses = []
        td_sum = torch.zeros_like(b["active"][self.agents[0]])
        leaves = [state["online"][bank.position] for bank in self.critic_banks]
        with torch.enable_grad():
            for bank, ps in zip(self.critic_banks, leaves, strict=True):
                i, K, R, n = bank.position, *self._shape(bank)
                with torch.no_grad():
                    q_next = bank_forward(bank.template, state["target"][i],
                                          repeat_rows(next_obs, R * n),
                                          repeat_rows(next_act, R * n))
                    q_next = q_next.view(K, R, n, -1, 1).amin(dim=1)
                    y = self._td_target(b, bank, q_next, hp["gamma"])  # (K, n, B, 1)
                q = bank_forward(bank.template, ps, repeat_rows(joint_obs, R * n),
                                 repeat_rows(joint_act, R * n)).view(K, R, n, -1, 1)
                active = self._agent_axis(b["active"], bank).unsqueeze(1)  # (K, 1, n, B, 1)
                weights = b["weights"].view(K, 1, 1, -1, 1) if "weights" in b else None
                losses.append(masked_mse(q, y.unsqueeze(1), active, weights))  # (K, R, n)
                td_sum = td_sum + ((q.detach() - y.unsqueeze(1)).abs() * active).sum(dim=(1, 2))
            total = torch.stack([loss.sum() for loss in losses]).sum()
            flat = [p for ps in leaves for p in ps.values()]
            grads = iter(torch.autograd.grad(total, flat))
        self.steps.step(state, self.critic_banks, [{k: next(grads) for k in ps} for ps in leaves],
                   hp["rows"], None)
        out["critic"] = tuple(loss.detach() for loss in losses)
        return td_sum

    def _actor_phase(self, state: Tree, b: Tree, hp: Tree, noise: Tree, due: torch.Tensor,
                     joint_obs: Any, acted: dict[str, torch.Tensor], out: Tree) -> None:
        """Actor losses (deterministic policy gradient through each agent's first critic,
        other agents' actions from the batch) and one clipped Adam step of the due members'
        actors."""
        leaves = [state["online"][bank.position] for bank in self.actor_banks]
        losses: dict[str, torch.Tensor] = {}
        with torch.enable_grad():
            own, raw = {}, {}
            for bank, ps in zip(self.actor_banks, leaves, strict=True):
                outs = bank_forward(bank.template, ps, stack_agents(b["obs"], bank.agents))
                for j, a in enumerate(bank.agents):
                    raw[a] = _agent_rows(outs, bank, j)
                    own[a] = self.ref.codecs[a].policy_with(raw[a], noise.get(a, {}).get("codec"),
                                                            b["mask"].get(a))
            for bank in self.critic_banks:
                i, K, R, n = bank.position, *self._shape(bank)
                first = {k: _first_role(p.detach(), K, R, n)
                         for k, p in state["online"][i].items()}
                actions = [torch.cat([own[a] * b["active"][a] if x == a else acted[x]
                                      for x in self.agents], dim=-1) for a in bank.agents]
                q = bank_forward(bank.template, first, repeat_rows(joint_obs, n),
                                 actions[0] if n == 1 else torch.stack(actions, 1).flatten(0, 1))
                active = self._agent_axis(b["active"], bank)  # (K, n, B, 1)
                loss = -masked_mean(q.view(K, n, -1, 1), active)  # (K, n)
                for j, a in enumerate(bank.agents):
                    reg = masked_mean(raw[a].square().mean(dim=-1, keepdim=True),
                                      b["active"][a])
                    losses[a] = loss[:, j] + hp["actor_reg"] * reg
            total = torch.stack([v.sum() for v in losses.values()]).sum()
            flat = [p for ps in leaves for p in ps.values()]
            grads = iter(torch.autograd.grad(total, flat))
        self.steps.step(state, self.actor_banks, [{k: next(grads) for k in ps} for ps in leaves],
                   hp["rows"], due)
        out["actor"] = tuple(torch.stack([losses[a].detach() for a in bank.agents], dim=1)
                             for bank in self.actor_banks)

    # -- pieces ----------------------------------------------------------------------------

    def _shape(self, bank: Bank) -> tuple[int, int, int]:
        return len(self.members), len(bank.roles), len(bank.agents)

    def _joint(self, actions: dict[str, torch.Tensor], active: dict[str, torch.Tensor]
               ) -> torch.Tensor:
        """The critics' joint action: each agent's, zeros on rows where it is inactive (a
        seat a league opponent holds, or an agent that is gone, is part of the env)."""
        return torch.cat([actions[a] * active[a] for a in self.agents], dim=-1)

    def _agent_axis(self, xs: dict[str, torch.Tensor], bank: Bank) -> torch.Tensor:
        """Per-agent ``(K, B, d)`` of the bank's agents as ``(K, n, B, d)``."""
        if len(bank.agents) == 1:
            return xs[bank.agents[0]].unsqueeze(1)
        return torch.stack([xs[a] for a in bank.agents], dim=1)

    def _td_target(self, b: Tree, bank: Bank, q_next: torch.Tensor, gamma: torch.Tensor
                   ) -> torch.Tensor:
        """The TD targets (:func:`td_target`) of the bank's agents ``(K, n, B, 1)``."""
        return td_target(self._agent_axis(b["reward"], bank),
                         self._agent_axis(b["terminated"], bank), q_next, gamma.view(-1, 1, 1, 1),
                         self._agent_axis(b["n_steps"], bank))


def smoothed(u: torch.Tensor, noise: torch.Tensor, policy_noise: torch.Tensor | float,
             noise_clip: torch.Tensor | float) -> torch.Tensor:
    """MATD3's target smoothing: a Box target action ``u`` (critic form, in [-1, 1]) plus
    standard normal ``noise`` scaled by ``policy_noise`` and clipped to ``noise_clip``, then
    clipped to the bounds."""
    clip = torch.as_tensor(noise_clip, dtype=u.dtype, device=u.device)
    return (u + torch.maximum(torch.minimum(noise * policy_noise, clip), -clip)).clamp(-1.0, 1.0)


def _agent_rows(out: torch.Tensor, bank: Bank, j: int) -> torch.Tensor:
    """Agent ``j``'s rows ``(K, B, d)`` of an actor bank's output ``(K * n, B, d)``."""
    n = len(bank.agents)
    return out if n == 1 else out.view(-1, n, *out.shape[1:])[:, j]


def _first_role(x: torch.Tensor, k: int, r: int, n: int) -> torch.Tensor:
    """A critic bank's rows ``(K * R * n, ...)`` of its first role, ``(K * n, ...)``."""
    return x if r == 1 else x.view(k, r, n, *x.shape[1:])[:, 0].flatten(0, 1)
