"""Which members share a learner process (``population.members_per_learner``). Pure code.

A learner hosting a group updates its members together, members of one network shape as one
stacked computation; fewer processes also mean less memory and a shorter
start-up, since each imports torch and builds its networks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal


def members_per_learner(setting: int | Literal["auto"], members: int,
                        cluster: Mapping[str, float] | None, gpus_per_learner: float) -> int:
    """How many members each learner process hosts: ``setting``, or for ``auto``:

    - in one process (``cluster`` None): all of them, as one stack (a stack of ``K`` updates
      faster than ``K`` stacks of one, from two members on);
    - on a cluster with GPUs that learners ask for: as many learners as the GPUs take at
      ``gpus_per_learner`` each, the members spread over them (a stacked update is bound by
      the host's Python and kernel launches, not by the GPU, so learner processes sharing a
      GPU side by side get more done than one process holding them all);
    - on CPU: one learner per core, the members spread over them (more processes than cores
      contend for them; fewer leave cores idle).
    """
    if setting != "auto":
        return min(int(setting), members)
    if cluster is None:
        return members
    gpus = float(cluster.get("GPU", 0.0))
    if gpus >= 1 and gpus_per_learner > 0:
        learners = max(1, min(members, int(gpus / gpus_per_learner + 1e-9)))
        return -(-members // learners)
    cores = max(1, int(cluster.get("CPU", 1.0)))
    return -(-members // cores)


def learner_groups(members: int, per_learner: int) -> list[list[int]]:
    """``members`` split in member order into as few groups of at most ``per_learner`` as
    possible, their sizes differing by one at most (16 by 5: 4, 4, 4, 4 rather than
    5, 5, 5, 1, so no learner carries more than it must)."""
    if members < 1 or per_learner < 1:
        raise ValueError(f"members ({members}) and members per learner ({per_learner}) must "
                         "be at least 1")
    count = -(-members // per_learner)
    base, extra = divmod(members, count)
    groups, start = [], 0
    for g in range(count):
        size = base + (1 if g < extra else 0)
        groups.append(list(range(start, start + size)))
        start += size
    return groups
