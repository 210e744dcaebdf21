"""Running a population: everything between a config and a finished run.

Subpackages by kind, higher ones importing lower ones only:

- ``driver``: the process a user starts (:func:`~distmarl.runtime.driver.trainer.train`):
  starting or joining Ray, signals, progress, resume checks;
- ``coordinator``: the run's loop (:class:`~distmarl.runtime.coordinator.run.TrainingRun`) and
  the evolution step between generations, carried out through a fleet;
- ``records``: what a run leaves behind: metrics, checkpoints, tracking, videos;
- ``hooks``: what depends on the game a run plays (cooperative, or a league);
- ``fleets``: who carries out the run's calls: in this process (``--local``) or as Ray actors,
  with fault keeping, snapshots and resource requests;
- ``actors``: the learner, rollout worker and buffer processes, and the shells they run;
- ``logic``: pure run logic: counters, scheduling, the data paths (what a result earns), learner
  grouping.

Ray is imported by the driver's trainer and cluster, the coordinator's actor, the Ray fleet
with its fault keeping and snapshots, and the actors; nothing else here imports it.
"""
