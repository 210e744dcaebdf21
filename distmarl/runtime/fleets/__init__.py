"""Who carries out a run's calls (:class:`~distmarl.runtime.fleets.protocol.Fleet`): the whole
population in this process for ``--local``
(:class:`~distmarl.runtime.fleets.local_fleet.LocalFleet`), or as Ray actors
(:class:`~distmarl.runtime.fleets.ray_fleet.RayFleet`) kept alive by fault keeping and
snapshots, sized by the resource plan."""
