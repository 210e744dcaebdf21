"""Member groups: several members of one algorithm, whose networks share their shapes, updated
as one batched computation instead of one member after another. A stack holds its members'
parameters, targets and optimiser states in stacked tensors that the members' own networks and
optimisers alias (:mod:`~distmarl.algorithms.common.slots`): the update moves them in place, so
checkpoints, copies, mutations and hyperparameter changes see no difference, and a learner
keeps its stacks from one call to the next (:class:`Stacks`). The off-policy stack
(:class:`OffPolicyStack`) is also how a member alone learns."""

from distmarl.algorithms.groups.learn import Stacks, plan_stacks
from distmarl.algorithms.groups.onpolicy import StackedOnPolicy, stackable_on_policy
from distmarl.algorithms.offpolicy.stack import OffPolicyStack, stackable

__all__ = ["OffPolicyStack", "StackedOnPolicy", "Stacks", "plan_stacks", "stackable",
           "stackable_on_policy"]
