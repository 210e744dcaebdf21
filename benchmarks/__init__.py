"""distmarl's benchmarks, each a module run from the repository root as
``python -m benchmarks.NAME`` (``--help`` lists its options):

* ``throughput``: population env steps/s and updates/s against the single-process trainer and
  AgileRL in the same run; ``--time-to-target`` times the wall seconds to a score.
* ``buffer_bench``: replay buffer add / sample rates and bytes per row against a plain ring.
* ``env_bench``: the vector env's steps/s per core against a plain loop.
* ``learner_speed``: MADDPG / MATD3 updates per second on CPU or a GPU.
* ``member_vmap``, ``member_groups``: members updated as one stacked computation against
  their own updates; ``shared_device``: a stacked group against a learner process per member
  on one GPU (or CPU).
* ``scaling``: env steps/s against workers per member, population size, members per learner.
* ``learning``: evaluation score against env steps, one member per seed.
* ``spread_reference``: hand-written simple_spread controllers, what a spread score means.
* ``soak``: a long run sampling every actor's memory and the object store.

:mod:`benchmarks.timing` holds the timing rule the in-process ones share;
:mod:`benchmarks.baselines` the third-party baselines (AgileRL, RLlib).
"""
