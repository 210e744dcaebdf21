"""Competitive and mixed games: a league of the population, frozen snapshots and reference
players, rated by their games (OpenSkill).

Pure decisions (``plans``, ``state``, ``ratings``, ``final``: which matches, whose rating,
which final games, each from an explicit ``numpy.random.Generator``), the rollout worker's side
(``seating``: who holds which seat of which sub-env; ``references``: scripted players;
``opponents``: the policies a worker keeps), a run's league from its config (``setup``), and a
saved member's games again (``saved``). The run calls the league through one hooks object
(:mod:`distmarl.runtime.hooks.league`).
"""
