"""Whether a game looks competitive, from its agents' names and a probe's random steps.

Without a ``league:`` section a member's fitness is the sum of every agent's reward. In a
cooperative game that is the team's score; in a competitive one it says little: exactly 0 in
every game of a zero-sum game (tictactoe, connect four, rock-paper-scissors: selection is then
a coin toss), and a mix of both sides' rewards where sides oppose (simple_tag, battle: it can
pay both teams for being passive). :func:`competitive_warning` names what looks competitive and
the ``league:`` setting that fits.
"""

from __future__ import annotations

from distmarl.agents import agent_groups
from distmarl.envs.probe import ProbeReport

#: Opposed sides, by the words of their agent groups (a group is on a side when its name is,
#: starts with or ends with one of the side's words): mpe2's simple_tag / simple_adversary /
#: simple_push / simple_world_comm, magent2's battle / battlefield / combined_arms,
#: adversarial_pursuit and tiger_deer, mpe2's simple_crypto.
SIDE_WORDS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("adversary",), ("agent",)),
    (("red",), ("blue",)),
    (("predator",), ("prey",)),
    (("tiger",), ("deer",)),
    (("eve",), ("alice", "bob")),
)


def _on_side(group: str, words: tuple[str, ...]) -> bool:
    return any(group == w or group.startswith(w) or group.endswith(w) for w in words)


def opposed_sides(agents: list[str]) -> dict[str, list[str]] | None:
    """Side name -> agent groups, when the groups of ``agents`` match two sides or more of one
    :data:`SIDE_WORDS` entry (groups on no side are left out); else None."""
    groups = list(agent_groups(agents))
    for entry in SIDE_WORDS:
        sides = {words[0]: [g for g in groups if _on_side(g, words)] for words in entry}
        sides = {side: found for side, found in sides.items() if found}
        if len(sides) >= 2:
            return sides
    return None


def zero_sum(report: ProbeReport) -> bool:
    """Whether every probe step with a nonzero reward summed to exactly 0 (one at least)."""
    return report.scored_steps > 0 and report.zero_sum_steps == report.scored_steps


def turn_based_pair(report: ProbeReport) -> bool:
    """A classic board or card game: two players taking turns with action masks, and no step
    whose rewards showed it cooperative (nonzero rewards not summing to 0)."""
    return (report.turn_based and report.masked and len(report.agents) == 2
            and report.zero_sum_steps == report.scored_steps)


def _suggestion(agents: list[str], sides: dict[str, list[str]] | None) -> str:
    """The ``league:`` setting that fits: a symmetric game when every agent is in one group
    (its seats are alike), else sides of the groups."""
    groups = list(agent_groups(agents))
    if sides is None and len(groups) == 1:
        return "league: {symmetric: true} (one policy takes every seat)"
    named = sides or {g: [g] for g in groups}
    text = ", ".join(f"{side}: [{', '.join(gs)}]" for side, gs in named.items())
    left = [g for g in groups if not any(g in gs for gs in named.values())]
    extra = f", with group(s) {', '.join(left)} added to a side" if left else ""
    return f"league: {{sides: {{{text}}}}}{extra}"


def competitive_warning(spec: str, report: ProbeReport) -> str | None:
    """The warning for a run of ``spec`` without a ``league:`` section when the probe's
    ``report`` looks competitive (zero-sum rewards, a turn-based two-player game with action
    masks, or agent groups that look like opposed sides); None when it looks cooperative."""
    agents = list(report.agents)
    sides = opposed_sides(agents)
    signs = []
    if turn_based_pair(report):
        signs.append("two players taking turns with action masks")
    if zero_sum(report):
        signs.append(f"all agents' rewards summed to exactly 0 in each of the "
                     f"{report.scored_steps} random steps that scored")
    if sides:
        signs.append("agent groups " + " vs ".join("/".join(g) for g in sides.values())
                     + " look like opposed sides")
    if not signs:
        return None
    effect = ("which mixes the sides' rewards (it can pay every side for being passive)" if sides
              and not zero_sum(report) else
              "which is 0 in every game of a zero-sum game, so selection is a coin toss")
    return (f"env.spec {spec!r} looks competitive ({'; '.join(signs)}) but the config has no "
            f"league: section: a member's fitness is the sum of all agents' rewards, {effect}. "
            f"To rate members by their games, set {_suggestion(agents, sides)}")
