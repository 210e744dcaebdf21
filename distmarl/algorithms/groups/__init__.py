"""Member groups: several members of one algorithm, whose networks share their shapes, updated
as one batched computation (parameters stacked along a leading member axis, ``torch.func.vmap``
over it) instead of one member after another. Each member's own objects stay the truth between
updates: a group gathers their parameters, targets and optimiser states, runs its updates, and
writes everything back, so checkpoints, copies, mutations and hyperparameter changes see no
difference."""

from distmarl.algorithms.groups.learn import learn_fragments, learn_replay, plan_stacks
from distmarl.algorithms.groups.offpolicy import StackedOffPolicy, stackable
from distmarl.algorithms.groups.onpolicy import StackedOnPolicy, stackable_on_policy

__all__ = ["StackedOffPolicy", "StackedOnPolicy", "learn_fragments", "learn_replay",
           "plan_stacks", "stackable", "stackable_on_policy"]
