"""Members' policies for the run's records (videos, the elite model), built from the weights
each member last published, as its rollout workers build theirs.

A published weights object (``get_weights()`` output) holds the actors only: their
architectures and parameters, the exploration hyperparameters, the algorithm's name (an
on-policy member's also its value networks and their normalisation, which its workers record
values with). The policy is a fresh algorithm of that name with those weights loaded
(``set_weights``); the critics, targets and optimiser states it was built with are never
trained and never read, so the process that records holds no member's learner state.
"""

from __future__ import annotations

from collections.abc import Callable

from distmarl.algorithms import Algorithm
from distmarl.runtime.actors.clients import Store
from distmarl.runtime.logic.run_state import RunState

__all__ = ["PublishedPolicies"]


class PublishedPolicies:
    """``policies(member)``: member ``member`` of ``state`` acting with its latest published
    weights (read from ``store``), in a fresh policy ``new_policy(name)`` of the weights'
    algorithm (built to act: no critics, target copies or optimisers). The weights are those the member's workers act with and its last evaluation
    scored."""

    def __init__(self, state: RunState, store: Store,
                 new_policy: Callable[[str], Algorithm]) -> None:
        self.state, self.store, self.new_policy = state, store, new_policy

    def __call__(self, member: int) -> Algorithm:
        box = self.state.members[member].weights_box
        if not box:
            raise RuntimeError(f"member {member} has published no weights yet")
        weights = self.store.get(box[0])
        policy = self.new_policy(weights["algorithm"])
        policy.set_weights(weights)
        return policy
