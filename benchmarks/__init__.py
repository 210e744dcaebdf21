"""distmarl's benchmarks, run from the repository root as ``python -m benchmarks.KIND.NAME``
(``--help`` lists a script's options), grouped by what they measure:

* ``micro``: one component timed in one process. ``buffer_bench`` (replay buffer rates and
  bytes per row against a plain ring), ``env_bench`` (the vector env's steps/s per core against
  a plain loop), ``learner_speed`` (MADDPG / MATD3 updates/s on CPU or a GPU), ``member_vmap``
  and ``member_groups`` (members updated as one stacked computation against their own
  updates), ``step_ops`` (operations a stack's step dispatches against its members),
  ``learner_step`` (a stack's step eager, compiled or captured: what ``auto`` picks), and
  against another commit's worktree (``against`` runs them): ``stack_speed`` (the update)
  and ``worker_memory`` (what a rollout worker holds); ``timing`` holds the timing rule they
  share. ``pytest benchmarks/micro`` runs the same measures as pytest-benchmark tests.
* ``system``: the whole trainer. ``throughput`` (population env steps/s against the
  single-process trainer and AgileRL; ``--time-to-target``), ``scaling`` (workers per member,
  population size, members per learner, nodes), ``fleets`` (the main job on Ray and in
  process), ``main_job_against`` (the main job on Ray against another commit's worktree),
  ``shared_device`` (a stacked group against a learner process per member on one device),
  ``soak`` (memory over a long run), ``pixels`` (IPPO on pistonball frames against AgileRL).
* ``learning``: what members learn. ``learning`` (score against env steps, one member per
  seed), ``population_value`` (evolution against independent members and one member),
  ``population_size`` (16 members against 4), ``league`` (competitive games against
  reference players), ``connect_four`` (a self-play population against random legal play),
  ``spread_reference`` (hand-written spread controllers: what a spread score means).
* ``analysis``: read a stored run without training. ``tictactoe_exact`` (a tictactoe
  member's exact results against random play), ``fitness_noise`` (how often an evaluation
  ranks two members right).
* ``baselines``: the third-party trainers and buffers (AgileRL, RLlib) measured beside
  distmarl.

:mod:`distmarl.studies.sweep` runs the benchmarks that train per seed and arm (a sweep in a
folder, ``--out``, resumed where it stopped; ``distmarl report`` reads it too), and
:mod:`distmarl.studies.stats` holds the mean, standard error and paired difference they
report; :mod:`benchmarks.system.training` times one run for the system benchmarks. ``python
-m benchmarks.report`` writes ``docs/benchmarks.md`` from the stored results in
``benchmarks/results``.
"""

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: the repository root: benchmarks run from it, and the example configs live under it
ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "examples" / "configs"
#: where a benchmark keeps its runs unless told (``--out``; git ignores ``runs/``)
RUNS = ROOT / "runs" / "benchmarks"


def train_seconds(summary: Mapping[str, Any]) -> float:
    """Seconds of training in a run summary: its wall seconds without the start-up (actors
    importing torch, making envs), which rates are taken over."""
    return float(summary["wall_seconds"] - summary["setup_seconds"])


def exit_status(main: Callable[[], int]) -> int:
    """``main()``'s exit status, or 2 after one line naming what is wrong where it refuses its
    input (a :class:`~distmarl.config.ConfigError`: a bad override, a sweep folder holding
    other runs), as the ``distmarl`` command does."""
    from distmarl.config import ConfigError

    try:
        return main()
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
