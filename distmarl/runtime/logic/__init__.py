"""Pure run logic, no Ray and no actors: the run's counters
(:mod:`~distmarl.runtime.logic.run_state`), which calls to make next
(:mod:`~distmarl.runtime.logic.scheduler`), how collected data earns updates
(:mod:`~distmarl.runtime.logic.datapath`) and which members share a learner
(:mod:`~distmarl.runtime.logic.grouping`)."""
