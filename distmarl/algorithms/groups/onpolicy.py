"""IPPO / MAPPO members updated as one stacked computation.

Each member prepares its own fragment's rows as its own update would
(:meth:`OnPolicyMultiAgent.learning_rows`: GAE, value targets, value normalisation), then, per
agent group, the members' PPO epochs run together: each member draws its own shuffle from its
own generator, every minibatch is one ``vmap`` of the PPO loss and its gradient over the members
(``torch.func``), the policy (with its log-std) and the value network are clipped per member,
and one stacked Adam step moves the members that step. The loop's per-member branches become
masks: a minibatch without an active row, a non-finite gradient (no step), and the target-KL
early stop (the member stops drawing and stepping while the others go on).

Shapes: ``K`` members, ``N`` rows per agent group (the same for every member: one fragment
size), minibatches ``(K, batch_size, ...)``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.func import functional_call

from distmarl import tree
from distmarl.algorithms.base import Batch
from distmarl.algorithms.common.adam import Adam
from distmarl.algorithms.common.slots import Slots
from distmarl.algorithms.common.stacked_adam import Params, StackedAdam, adam_step, clip_per_member
from distmarl.algorithms.groups.trees import member_grads, stack_tree
from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent
from distmarl.algorithms.onpolicy.ppo_loss import ppo_terms
from distmarl.algorithms.onpolicy.ppo_update import GroupRows

#: each member's hyperparameters an update epoch reads, as ``(K,)`` tensors
UPDATE_HP = ("lr", "clip_coef", "ent_coef", "vf_coef", "max_grad_norm")
#: what must be one value across a stack: they set the shape of the epochs
SHARED_HP = ("update_epochs", "batch_size")
_TERMS = ("policy", "value", "entropy", "approx_kl", "clip_fraction")

Tree = dict[str, Any]


def stackable_on_policy(members: Sequence[OnPolicyMultiAgent]) -> str | None:
    """Why ``members`` cannot be updated as one stack (None: they can): one algorithm and
    device, the same agent groups, networks of the same shapes, plain Adam optimisers, and
    one ``update_epochs`` and ``batch_size``."""
    if not members:
        return "no members"
    first = members[0]
    for i, m in enumerate(members):
        if type(m) is not type(first) or m.device != first.device:
            return f"member {i} is {m.name} on {m.device}, member 0 {first.name} on {first.device}"
        if m.groups != first.groups or m.nets.arch() != first.nets.arch():
            return f"member {i}'s agent groups or networks differ in shape from member 0's"
        for h in SHARED_HP:
            if m.hp[h] != first.hp[h]:
                return f"member {i}'s {h} is {m.hp[h]}, member 0's {first.hp[h]}"
        for opt in [*m.nets.optim.values(), *m.log_std_optim.values()]:
            group = opt.param_groups[0]
            if len(opt.param_groups) != 1 or group["weight_decay"] or group["amsgrad"]:
                return f"member {i} has an optimiser that is not a plain Adam"
    return None


class StackedOnPolicy:
    """One stacked update of ``members`` (IPPO or MAPPO, see :func:`stackable_on_policy`);
    their own objects hold the result after each :meth:`learn` call."""

    def __init__(self, members: Sequence[OnPolicyMultiAgent]) -> None:
        problem = stackable_on_policy(members)
        if problem is not None:
            raise ValueError(f"these members cannot be stacked: {problem}")
        self.members = list(members)
        self.ref = self.members[0]
        self.device = self.ref.device
        self.templates = {n: copy.deepcopy(net).to("meta")
                          for n, net in self.ref.nets.online.items()}
        self._grads: dict[str, Any] = {}
        self.slots = Slots(self.members, self._member_tensors)
        #: each group's stacked parameters and Adam states, per network (views of the slots)
        self.state = {g: self._slots_of(g) for g in self.ref.groups}

    def learn(self, batches: Sequence[Batch]) -> list[dict[str, float]]:
        """One update of each member on its own fragment ``batches[k]``; per member, the
        metrics its own ``learn`` returns."""
        if len(batches) != len(self.members):
            raise ValueError(f"one fragment per member ({len(self.members)}), "
                             f"got {len(batches)}")
        rows = [m.learning_rows(b) for m, b in zip(self.members, batches, strict=True)]
        metrics: list[dict[str, float]] = [{} for _ in self.members]
        for g in self.ref.groups:
            for k, out in enumerate(self._update_group(g, [r[g] for r in rows])):
                metrics[k].update(self.ref.group_metrics(g, out))
        return [m.learned(x) for m, x in zip(self.members, metrics, strict=True)]

    # -- one agent group's epochs for every member -----------------------------------------

    def _update_group(self, g: str, group_rows: Sequence[GroupRows]) -> list[dict[str, float]]:
        sizes = {int(r.active.shape[0]) for r in group_rows}
        if len(sizes) != 1:
            raise ValueError(f"the members' fragments differ in size ({sorted(sizes)} rows of "
                             f"group {g}): a stacked update needs one size")
        n, k = sizes.pop(), len(self.members)
        d = tree.prune(stack_tree([r._asdict() for r in group_rows]))
        nets = self._nets(g)
        params, adam = self.state[g]
        hp = {h: torch.tensor([float(m.hp[h]) for m in self.members], device=self.device)
              for h in UPDATE_HP}
        target_kl = torch.tensor([float("inf") if m.hp["target_kl"] is None
                                  else float(m.hp["target_kl"]) for m in self.members],
                                 device=self.device)
        loss_grads = self._loss_grads(g)
        running = torch.ones(k, dtype=torch.bool, device=self.device)
        sums = {t: torch.zeros(k, device=self.device) for t in _TERMS}
        steps = torch.zeros(k, device=self.device)
        epochs = torch.zeros(k, device=self.device)
        skipped = torch.zeros(k, device=self.device)
        members = torch.arange(k, device=self.device)
        for _ in range(int(self.ref.hp["update_epochs"])):
            if not bool(running.any()):
                break
            perm = torch.stack([
                torch.randperm(n, generator=m._torch_gen, device=self.device) if bool(running[i])
                else torch.arange(n, device=self.device) for i, m in enumerate(self.members)])
            kl_sum = torch.zeros(k, device=self.device)
            kl_count = torch.zeros(k, device=self.device)
            for idx in perm.split(int(self.ref.hp["batch_size"]), dim=1):
                mb = tree.take(d, (members[:, None], idx))
                live = running & mb["active"].any(dim=1)
                if not bool(live.any()):
                    continue
                grads, terms = loss_grads(params, mb, hp)
                # per network: one joint norm would let the value loss' scale throttle the
                # policy (whose log-std is clipped with it)
                finite = clip_per_member(
                    [[x for name in part if name in grads for x in grads[name].values()]
                     for part in (("policy", "log_std"), ("value",))], hp["max_grad_norm"])
                skipped += (live & ~finite).float()
                step = live & finite
                adam_step([adam[name] for name in nets], [params[name] for name in nets],
                          [grads[name] for name in nets], hp["lr"], step)
                for t in _TERMS:
                    sums[t] += torch.where(step, terms[t], torch.zeros_like(terms[t]))
                kl_sum += torch.where(step, terms["approx_kl"], torch.zeros_like(kl_sum))
                kl_count += step.float()
                steps += step.float()
            epochs += running.float()
            over = (kl_count > 0) & (kl_sum / kl_count.clamp_min(1) > target_kl)
            running = running & ~over
        means = {t: (sums[t] / steps.clamp_min(1)).tolist() for t in _TERMS}
        return [{**{t: means[t][i] for t in _TERMS}, "epochs": float(epochs[i]),
                 "skipped_steps": float(skipped[i])} for i in range(k)]

    # -- the members' slots -----------------------------------------------------------------

    def intact(self) -> bool:
        """Whether every member still lives in its slot (see :class:`Slots`): False after a
        member's networks or optimiser states were replaced, when the stack must be built
        again."""
        return self.slots.intact()

    def _member_tensors(self, m: OnPolicyMultiAgent) -> dict[tuple[str, ...], torch.Tensor]:
        """Member ``m``'s parameters and Adam state (created where a parameter has none yet)
        of every group's networks, by ``(kind, group, network, parameter)``."""
        out: dict[tuple[str, ...], torch.Tensor] = {}
        for g in self.ref.groups:
            for name in self._nets(g):
                opt = self._optim(m, g, name)
                for pname, p in self._params(m, g, name).items():
                    state = opt.state_of(p)
                    out["p", g, name, pname] = p
                    out["m", g, name, pname] = state["exp_avg"]
                    out["v", g, name, pname] = state["exp_avg_sq"]
                    out["step", g, name, pname] = state["step"]
        return out

    def _slots_of(self, g: str) -> tuple[dict[str, Params], dict[str, StackedAdam]]:
        """Group ``g``'s stacked parameters and Adam states, per network."""
        by: dict[tuple[str, str], Params] = {}
        for (kind, group, name, pname), x in self.slots.stacked.items():
            if group == g:
                by.setdefault((kind, name), {})[pname] = x
        adam = {}
        for name in self._nets(g):
            settings = self._optim(self.ref, g, name).param_groups[0]
            adam[name] = StackedAdam(by["m", name], by["v", name], by["step", name],
                                     (float(settings["betas"][0]), float(settings["betas"][1])),
                                     float(settings["eps"]))
        return {name: by["p", name] for name in self._nets(g)}, adam

    def _nets(self, g: str) -> list[str]:
        """The group's stacked parameter sets: its policy, its value network, its log-std."""
        return ["policy", "value", *(["log_std"] if g in self.ref.log_std else [])]

    def _params(self, m: OnPolicyMultiAgent, g: str, name: str) -> dict[str, torch.Tensor]:
        if name == "log_std":
            return {"log_std": m.log_std[g]}
        return dict(m.nets.online[f"{name}/{g}"].named_parameters())

    def _optim(self, m: OnPolicyMultiAgent, g: str, name: str) -> Adam:
        return m.log_std_optim[g] if name == "log_std" else m.nets.optim[f"{name}/{g}"]

    def _loss_grads(self, g: str) -> Any:
        """The gradients of the group's PPO loss over the members
        (:func:`~distmarl.algorithms.groups.trees.member_grads`, built once)."""
        if g in self._grads:
            return self._grads[g]
        head = self.ref.heads[g]
        policy, value = self.templates[f"policy/{g}"], self.templates[f"value/{g}"]

        def loss(params: Tree, mb: Tree, hp: Mapping[str, torch.Tensor]
                 ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            out = functional_call(policy, params["policy"], (mb["obs"],))
            log_std = params["log_std"]["log_std"] if "log_std" in params else None
            new_log_prob, entropy = head.evaluate(out, log_std, mb["action"], mb.get("mask"))
            new_value = functional_call(value, params["value"], (mb["critic_obs"],)).squeeze(-1)
            terms = ppo_terms(new_log_prob, mb["log_prob"], mb["advantage"], entropy, new_value,
                              mb["value_target"], mb["active"], hp["clip_coef"], hp["ent_coef"],
                              hp["vf_coef"])
            return terms.loss, {t: getattr(terms, t) for t in _TERMS}

        self._grads[g] = member_grads(loss)
        return self._grads[g]
