"""Member groups: several members of one algorithm, whose networks share their shapes, updated
as one batched computation (parameters stacked along a leading member axis, ``torch.func.vmap``
over it) instead of one member after another. A stack holds its members' parameters, targets
and optimiser states in stacked tensors that the members' own networks and optimisers alias
(:mod:`~distmarl.algorithms.groups.slots`): the update moves them in place, so checkpoints,
copies, mutations and hyperparameter changes see no difference, and a learner keeps its stacks
from one call to the next (:class:`Stacks`)."""

from distmarl.algorithms.groups.learn import Stacks, plan_stacks
from distmarl.algorithms.groups.offpolicy import StackedOffPolicy, stackable
from distmarl.algorithms.groups.onpolicy import StackedOnPolicy, stackable_on_policy

__all__ = ["StackedOffPolicy", "StackedOnPolicy", "Stacks", "plan_stacks", "stackable",
           "stackable_on_policy"]
