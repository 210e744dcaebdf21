"""The IPPO / MAPPO update: members stacked, networks run in banks.

A stack holds ``K`` members of one algorithm, agent groups and network shapes
(:func:`~distmarl.algorithms.common.stacking.stack_problem`); a single member is a stack of
one, and this is the only update there is. Each member's parameters (with its log-stds) and Adam state live in the stack's storage
(:class:`~distmarl.algorithms.common.slots.Slots`: the member's own tensors alias their rows),
and every member's policy (or value network) of one agent group runs as one batched network
(:func:`~distmarl.networks.banked.bank_forward`).

Each member prepares its own fragment's rows as before (:meth:`OnPolicyMultiAgent.learning_rows`:
GAE, value targets, value normalisation). Then, per agent group, the members' PPO epochs run
together: each member draws its own shuffle from its own generator; every minibatch is one
pass of the PPO loss (:func:`~distmarl.algorithms.onpolicy.ppo_loss.ppo_terms`, each member's
own coefficients) and its gradient for every member; the policy (with its log-std) and the
value network are clipped per member and network; and each member that steps takes its own
Adam step (:class:`~distmarl.algorithms.common.row_adam.RowAdam`). The epoch loop's
per-member branches are masks read once per minibatch: a minibatch without an active row and
a non-finite gradient (no step), and the target-KL early stop (the member stops drawing and
stepping while the others go on).

Shapes: ``K`` members, ``N`` rows per agent group (the same for every member: one fragment
size), minibatches ``(K, batch_size, ...)``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from distmarl import tree
from distmarl.algorithms.base import Batch
from distmarl.algorithms.common.row_adam import RowAdam
from distmarl.algorithms.common.slots import Slots
from distmarl.algorithms.common.stacked_adam import Params, StackedAdam, clip_per_member
from distmarl.algorithms.common.stacking import stack_problem
from distmarl.algorithms.onpolicy.ppo_loss import PPOTerms, ppo_terms
from distmarl.algorithms.onpolicy.rows import GroupRows
from distmarl.networks.banked import bank_forward

if TYPE_CHECKING:  # the members' class steps its own members through this module
    from distmarl.algorithms.common.adam import Adam
    from distmarl.algorithms.onpolicy.ppo import OnPolicyMultiAgent

#: each member's hyperparameters a minibatch's loss reads, as ``(K,)`` tensors
UPDATE_HP = ("clip_coef", "ent_coef", "vf_coef", "max_grad_norm")
#: what must be one value across a stack: they set the shape of the epochs
SHARED_HP = ("update_epochs", "batch_size")
TERMS = ("policy", "value", "entropy", "approx_kl", "clip_fraction")

Tree = dict[str, Any]


class OnPolicyStack:
    """The update of ``members`` (IPPO or MAPPO, see :func:`stack_problem`); their own objects
    hold the result after each :meth:`learn` call."""

    def __init__(self, members: Sequence[OnPolicyMultiAgent]) -> None:
        problem = stack_problem(members)
        if problem is not None:
            raise ValueError(f"these members cannot be stacked: {problem}")
        self.members = list(members)
        self.ref = self.members[0]
        self.device = self.ref.device
        #: the stacked parameter sets: per agent group its policy, value network, log-std
        self.sets = [(g, name) for g in self.ref.groups for name in self._nets(g)]
        self.templates = {f"{name}/{g}": copy.deepcopy(self.ref.nets.online[f"{name}/{g}"])
                          .to("meta") for g, name in self.sets if name != "log_std"}
        self.slots = Slots(self.members, self._member_tensors)
        self.params, self.adams = self._state()
        for ps in self.params:  # the leaves every step differentiates
            for p in ps.values():
                p.requires_grad_(True)
        fused = bool(self.ref.nets.optim[f"policy/{next(iter(self.ref.groups))}"]
                     .param_groups[0]["fused"])
        self._adam = RowAdam(self.params, self.adams, [1] * len(self.sets), len(self.members),
                             fused)

    def learn(self, batches: Sequence[Batch]) -> list[dict[str, float]]:
        """One update of each member on its own fragment ``batches[k]``; per member, the
        metrics its :meth:`~OnPolicyMultiAgent.learn` returns."""
        if len(batches) != len(self.members):
            raise ValueError(f"one fragment per member ({len(self.members)}), "
                             f"got {len(batches)}")
        rows = [m.learning_rows(b) for m, b in zip(self.members, batches, strict=True)]
        metrics: list[dict[str, float]] = [{} for _ in self.members]
        for g in self.ref.groups:
            for k, out in enumerate(self._update_group(g, [r[g] for r in rows])):
                metrics[k].update(self.ref.group_metrics(g, out))
        return [m.learned(x) for m, x in zip(self.members, metrics, strict=True)]

    def intact(self) -> bool:
        """Whether every member still lives in its slot (see :class:`Slots`): False after a
        member's networks or optimiser states were replaced, when the stack must be built
        again."""
        return self.slots.intact()

    # -- one agent group's epochs for every member -----------------------------------------

    def _update_group(self, g: str, group_rows: Sequence[GroupRows]) -> list[dict[str, float]]:
        """``update_epochs`` passes over each member's rows of group ``g`` (see the module
        docstring); per member, the mean of each loss term over its steps, its ``epochs``
        and ``skipped_steps`` (minibatches whose gradient was not finite)."""
        sizes = {int(r.active.shape[0]) for r in group_rows}
        if len(sizes) != 1:
            raise ValueError(f"the members' fragments differ in size ({sorted(sizes)} rows of "
                             f"group {g}): a stacked update needs one size")
        n, k = sizes.pop(), len(self.members)
        d = _stacked_rows(group_rows)
        hp: Tree = {h: torch.tensor([float(m.hp[h]) for m in self.members], device=self.device)
                    for h in UPDATE_HP}
        hp["lr"] = [float(m.hp["lr"]) for m in self.members]
        members = torch.arange(k, device=self.device).unsqueeze(1)
        target_kl = [m.hp["target_kl"] for m in self.members]
        tally = _Tally(k)
        for _ in range(int(self.ref.hp["update_epochs"])):
            if not any(tally.running):
                break
            tally.start_epoch()
            for idx in self._shuffles(n, tally.running).split(int(self.ref.hp["batch_size"]),
                                                              dim=1):
                self._minibatch_step(g, _minibatch(d, members, idx), hp, tally)
            tally.end_epoch(target_kl)
        return tally.results()

    def _minibatch_step(self, g: str, mb: Tree, hp: Tree, tally: _Tally) -> None:
        """One gradient step of the running members on their minibatches ``mb``: each
        member's gradient clipped per network, and an Adam step of the members whose
        minibatch has an active row and whose gradient is finite (one read on the host)."""
        names = self._nets(g)
        sets = [self.sets.index((g, name)) for name in names]
        grads, terms = self._grads(g, sets, mb, hp)
        # per network: one joint norm would let the value loss' scale throttle the policy
        # (whose log-std is clipped with it)
        parts = [[x for name, gs in zip(names, grads, strict=True) if name != "value"
                  for x in gs.values()], list(grads[names.index("value")].values())]
        finite = clip_per_member(parts, hp["max_grad_norm"])
        live, ok = torch.stack([mb["active"].any(dim=-1), finite]).tolist()
        step = tally.count(live, ok)
        if any(step):
            self._adam.step(sets, grads, [hp["lr"]] * len(sets), None if all(step) else step)
            tally.add(torch.stack([getattr(terms, t) for t in TERMS]), step)

    def _shuffles(self, n: int, running: Sequence[bool]) -> torch.Tensor:
        """Each running member's shuffle of its ``n`` rows, drawn from its own generator (the
        others draw nothing: their rows in order, never stepped) ``(K, n)``."""
        return torch.stack([
            torch.randperm(n, generator=m._torch_gen, device=self.device) if run
            else torch.arange(n, device=self.device)
            for m, run in zip(self.members, running, strict=True)])

    def _grads(self, g: str, sets: Sequence[int], mb: Tree, hp: Tree
               ) -> tuple[list[Params], PPOTerms]:
        """Each member's gradient of its PPO loss on its minibatch, for the group's parameter
        sets ``sets`` (each as its parameters ``(K, ...)``), and the loss terms ``(K,)``."""
        leaves = [self.params[i] for i in sets]
        by_name = {self.sets[i][1]: ps for i, ps in zip(sets, leaves, strict=True)}
        with torch.enable_grad():
            out = bank_forward(self.templates[f"policy/{g}"], by_name["policy"], mb["obs"])
            log_std = by_name["log_std"]["log_std"].unsqueeze(1) if "log_std" in by_name \
                else None
            new_log_prob, entropy = self.ref.heads[g].evaluate(out, log_std, mb["action"],
                                                               mb.get("mask"))
            new_value = bank_forward(self.templates[f"value/{g}"], by_name["value"],
                                     mb["critic_obs"]).squeeze(-1)
            terms = ppo_terms(new_log_prob, mb["log_prob"], mb["advantage"], entropy,
                              new_value, mb["value_target"], mb["active"], hp["clip_coef"],
                              hp["ent_coef"], hp["vf_coef"])
            flat = [p for ps in leaves for p in ps.values()]
            found = iter(torch.autograd.grad(terms.loss.sum(), flat))
        return [{name: next(found) for name in ps} for ps in leaves], terms

    # -- the members' slots -----------------------------------------------------------------

    def _member_tensors(self, m: OnPolicyMultiAgent) -> dict[tuple[str, int, str], torch.Tensor]:
        """Member ``m``'s parameters and Adam state (created where a parameter has none yet)
        of every parameter set, by ``(kind, set, parameter)``."""
        out: dict[tuple[str, int, str], torch.Tensor] = {}
        for i, (g, name) in enumerate(self.sets):
            opt = _optim(m, g, name)
            for pname, p in _params(m, g, name).items():
                state = opt.state_of(p)
                out["p", i, pname] = p
                out["m", i, pname] = state["exp_avg"]
                out["v", i, pname] = state["exp_avg_sq"]
                out["step", i, pname] = state["step"]
        return out

    def _state(self) -> tuple[list[Params], list[StackedAdam]]:
        """Per parameter set: its stacked parameters and Adam state (views of the slots)."""
        by: dict[tuple[str, int], Params] = {}
        for (kind, i, pname), x in self.slots.stacked.items():
            by.setdefault((kind, i), {})[pname] = x
        group = _optim(self.ref, *self.sets[0]).param_groups[0]
        betas, eps = (float(group["betas"][0]), float(group["betas"][1])), float(group["eps"])
        adams = [StackedAdam(by["m", i], by["v", i], by["step", i], betas, eps)
                 for i in range(len(self.sets))]
        return [by["p", i] for i in range(len(self.sets))], adams

    def _nets(self, g: str) -> list[str]:
        """The group's parameter sets: its policy, its value network, its log-std."""
        return ["policy", "value", *(["log_std"] if g in self.ref.log_std else [])]


class _Tally:
    """One agent group's epochs as the host follows them, per member: whether it still runs
    (the target-KL stop), its steps, epochs and skipped steps; and the loss terms of the
    steps taken, kept on the device and read at the end."""

    def __init__(self, k: int) -> None:
        self.running = [True] * k
        self.steps, self.epochs, self.skipped = [0] * k, [0] * k, [0] * k
        self._reads: list[torch.Tensor] = []  #: per step: the terms ``(len(TERMS), K)``
        self._epoch_start = 0
        self._epoch_steps = [0] * k

    def start_epoch(self) -> None:
        self._epoch_start = len(self._reads)
        self._epoch_steps = [0] * len(self.running)

    def count(self, live: Sequence[bool], finite: Sequence[bool]) -> list[bool]:
        """Which members step on a minibatch: running, with an active row and a finite
        gradient (a member with an active row and a non-finite gradient skips)."""
        step = [r and bool(a) and bool(f)
                for r, a, f in zip(self.running, live, finite, strict=True)]
        for j, (r, a, f) in enumerate(zip(self.running, live, finite, strict=True)):
            self.skipped[j] += r and bool(a) and not f
            self.steps[j] += step[j]
            self._epoch_steps[j] += step[j]
        return step

    def add(self, terms: torch.Tensor, step: Sequence[bool]) -> None:
        """The terms ``(len(TERMS), K)`` of a step, zero for the members that did not
        step."""
        if not all(step):
            mask = torch.tensor(step, device=terms.device)
            terms = torch.where(mask, terms, torch.zeros_like(terms))
        self._reads.append(terms)

    def end_epoch(self, target_kl: Sequence[float | None]) -> None:
        """Count the epoch; a member whose epoch's mean approximate KL (each step's measured
        before the step, as CleanRL does) exceeds its ``target_kl`` stops."""
        for j, r in enumerate(self.running):
            self.epochs[j] += r
        checked = [r and t is not None and c > 0 for r, t, c in
                   zip(self.running, target_kl, self._epoch_steps, strict=True)]
        if not any(checked):
            return
        kl = torch.stack(self._reads[self._epoch_start:])[:, TERMS.index("approx_kl")]
        sums = kl.sum(0).tolist()
        self.running = [r and not (c and s / n > t)
                        for r, c, s, n, t in zip(self.running, checked, sums, self._epoch_steps,
                                                 target_kl, strict=True)]

    def results(self) -> list[dict[str, float]]:
        """Per member: each term's mean over its steps, its epochs and skipped steps."""
        k = len(self.running)
        sums = (torch.stack(self._reads).sum(0).tolist() if self._reads
                else [[0.0] * k for _ in TERMS])
        return [{**{t: sums[i][j] / max(self.steps[j], 1) for i, t in enumerate(TERMS)},
                 "epochs": float(self.epochs[j]), "skipped_steps": float(self.skipped[j])}
                for j in range(k)]


def _params(m: OnPolicyMultiAgent, g: str, name: str) -> dict[str, torch.Tensor]:
    if name == "log_std":
        return {"log_std": m.log_std[g]}
    return dict(m.nets.online[f"{name}/{g}"].named_parameters())


def _optim(m: OnPolicyMultiAgent, g: str, name: str) -> Adam:
    return m.log_std_optim[g] if name == "log_std" else m.nets.optim[f"{name}/{g}"]


def _stacked_rows(group_rows: Sequence[GroupRows]) -> Tree:
    """The members' rows as one tree ``(K, N, ...)`` (a member without an action mask where
    another has one: every action legal). IPPO's value input is its policy input, held
    once."""
    parts = [r._asdict() for r in group_rows]
    own_critic = all(p["critic_obs"] is p["obs"] for p in parts)
    if own_critic:
        for p in parts:
            p.pop("critic_obs")
    if len(parts) == 1:
        d = tree.map(lambda x: None if x is None else x.unsqueeze(0), parts[0])
    else:
        d = tree.map(_stack_present, *parts)
    d = tree.prune(d)
    if own_critic:
        d["critic_obs"] = d["obs"]
    return d


def _stack_present(*xs: torch.Tensor | None) -> torch.Tensor | None:
    first = next((x for x in xs if x is not None), None)
    if first is None:
        return None
    fill = torch.ones_like if first.dtype == torch.bool else torch.zeros_like
    return torch.stack([fill(first) if x is None else x for x in xs])


def _minibatch(d: Tree, members: torch.Tensor, idx: torch.Tensor) -> Tree:
    """Each member's rows ``idx[k]`` ``(K, b)`` of ``d`` ``(K, N, ...)``: ``(K, b, ...)``
    (``members``: ``arange(K)`` as ``(K, 1)``)."""
    mb = tree.take({k: v for k, v in d.items() if k != "critic_obs" or v is not d["obs"]},
                   (members, idx))
    mb.setdefault("critic_obs", mb["obs"])
    return mb
