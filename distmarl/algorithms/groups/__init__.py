"""Member groups: several members of one algorithm, whose networks share their shapes, updated
as one batched computation instead of one member after another. A stack holds its members'
parameters, targets and optimiser states in stacked tensors that the members' own networks and
optimisers alias (:mod:`~distmarl.algorithms.common.slots`): the update moves them in place, so
checkpoints, copies, mutations and hyperparameter changes see no difference, and a learner
keeps its stacks from one call to the next (:class:`Stacks`). A stack
(:class:`OffPolicyStack`, :class:`OnPolicyStack`) is also how a member alone learns."""

from distmarl.algorithms.common.stacking import stack_problem
from distmarl.algorithms.groups.learn import Stacks, plan_stacks
from distmarl.algorithms.offpolicy.stack import OffPolicyStack
from distmarl.algorithms.onpolicy.stack import OnPolicyStack

__all__ = ["OffPolicyStack", "OnPolicyStack", "Stacks", "plan_stacks", "stack_problem"]
