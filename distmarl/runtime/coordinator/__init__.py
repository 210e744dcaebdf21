"""The coordinator: the run's loop (:class:`~distmarl.runtime.coordinator.run.TrainingRun`, on
Ray as ``CoordinatorActor``) and the evolution step between generations
(:mod:`~distmarl.runtime.coordinator.generations`), both acting through a fleet."""
