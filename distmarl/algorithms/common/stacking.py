"""Which members can be updated as one stack: one rule, for the grouping and for the stacks.

Members stack when they are of one algorithm and device and declare the same
:meth:`~distmarl.algorithms.base.Algorithm.stack_settings` (network shapes, optimiser
settings; PPO: its epochs' shape). :func:`stack_key` groups members by it;
:func:`stack_problem` says why given members cannot stack, naming the first difference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distmarl.algorithms.base import Algorithm


def stack_key(algo: Algorithm) -> str:
    """What members must share to stack, as one string: algorithm, device and
    :meth:`~distmarl.algorithms.base.Algorithm.stack_settings`."""
    return json.dumps([algo.name, str(algo.device), algo.stack_settings()], sort_keys=True)


def stack_problem(members: Sequence[Algorithm]) -> str | None:
    """Why ``members`` cannot be updated as one stack (None: they can): one algorithm, one
    device, the same stack settings, and plain Adam optimisers (one parameter group, no
    weight decay, no AMSGrad) of one ``betas`` and ``eps`` within each member (a stack steps
    one Adam, each member at its own learning rate)."""
    if not members:
        return "no members"
    first = members[0]
    ref = first.stack_settings()
    for i, m in enumerate(members):
        if type(m) is not type(first):
            return f"member {i} is {m.name}, member 0 is {first.name}"
        if m.device != first.device:
            return f"member {i} is on {m.device}, member 0 on {first.device}"
        settings = m.stack_settings() if i else ref
        problem = _not_plain_adam(settings["optimisers"])
        if problem is not None:
            return f"member {i}'s {problem}"
        for key, value in settings.items():
            if value != ref[key]:
                return f"member {i}'s {_difference(key, value, ref[key])}"
    return None


def _not_plain_adam(optimisers: Mapping[str, list[dict[str, Any]]]) -> str | None:
    """What keeps one member's optimisers (``name -> settings per parameter group``) from
    being stepped as one Adam, or None."""
    for name, groups in optimisers.items():
        if len(groups) != 1 or groups[0]["weight_decay"] or groups[0]["amsgrad"]:
            return f"optimiser of {name} is not a plain Adam"
    kinds = {(tuple(g["betas"]), g["eps"]) for groups in optimisers.values() for g in groups}
    if len(kinds) > 1:
        return "optimisers differ in their Adam betas or eps"
    return None


def _difference(key: str, mine: Any, ref: Any) -> str:
    """The first difference of one setting between a member and member 0, in words."""
    if key == "networks":
        return "networks differ in shape from member 0's"
    name = next(k for k in {**ref, **mine} if mine.get(k) != ref.get(k))
    if key == "optimisers":
        return f"optimiser of {name} is not like member 0's ({mine.get(name)}, {ref.get(name)})"
    return f"{name} is {mine.get(name)}, member 0's {ref.get(name)}"
