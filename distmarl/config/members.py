"""Mixed-algorithm populations: each member's algorithm and starting hyperparameters.

``population.members`` lists groups (``{algorithm: MATD3, count: 2, hp: {...}}``); absent, every
member runs the ``algorithm`` section. A group's members start from the ``algorithm``
section's hyperparameters that their algorithm has (MATD3 members of a MADDPG config keep its
learning rates and take MATD3's own defaults for the rest), then the group's ``hp``; every
group shares the section's ``net_config``. A population mixes algorithms of one family only:
off-policy members share one replay buffer, on-policy ones one kind of fragment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distmarl.config.hparams import check_hp, check_search_ranges, hp_model, on_policy


def member_hp(section_hp: Mapping[str, Any], algorithm: str,
              group_hp: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``algorithm``'s hyperparameters for a group: the section's it has, then the group's;
    ValueError naming ``where`` (``population.members[i]``) for a bad one."""
    known = hp_model(algorithm).model_fields
    inherited = {k: v for k, v in section_hp.items() if k in known}
    try:
        return check_hp(algorithm, {**inherited, **group_hp})
    except ValueError as err:
        raise ValueError(f"{where}.hp: {err}") from None


def member_algorithms(groups: Sequence[Mapping[str, Any]], size: int) -> list[str]:
    """The algorithm of each member (groups in order, ``count`` members each), checked: the
    counts add up to ``size`` and every algorithm is of one family."""
    names = [g["algorithm"] for g in groups for _ in range(int(g["count"]))]
    if len(names) != size:
        counts = " + ".join(str(g["count"]) for g in groups)
        raise ValueError(f"population.members: counts {counts} = {len(names)} members, but "
                         f"population.size is {size}")
    for i, g in enumerate(groups):
        try:
            hp_model(g["algorithm"])
        except ValueError as err:
            raise ValueError(f"population.members[{i}].algorithm: {err}") from None
    for i, g in enumerate(groups):
        if on_policy(g["algorithm"]) != on_policy(groups[0]["algorithm"]):
            raise ValueError(f"population.members[{i}].algorithm {g['algorithm']} is not of "
                             f"the family of {groups[0]['algorithm']}: a population mixes "
                             "off-policy (MADDPG, MATD3) or on-policy (IPPO, MAPPO) algorithms, "
                             "not both")
    return names


def check_group_ranges(groups: Sequence[Mapping[str, Any]],
                       ranges: Mapping[str, tuple[float, float]]) -> None:
    """Every ``evolution.hp_config`` range must fit every group's algorithm (a member whose
    algorithm lacks a mutated setting is an error, not a silent skip)."""
    for i, g in enumerate(groups):
        try:
            check_search_ranges(g["algorithm"], ranges)
        except ValueError as err:
            raise ValueError(f"evolution.hp_config (for population.members[{i}], "
                             f"{g['algorithm']}): {err}") from None


def check_group_tournaments(groups: Sequence[Mapping[str, Any]], tournament_size: int) -> None:
    """Members copy only members of their own algorithm, so each group holds a tournament."""
    for i, g in enumerate(groups):
        if int(g["count"]) < tournament_size:
            raise ValueError(f"evolution.tournament.size {tournament_size} is larger than "
                             f"population.members[{i}].count {g['count']} ({g['algorithm']}): "
                             "members copy only members of their own algorithm")
