"""The game a run plays, as one hooks object (:class:`~distmarl.runtime.hooks.base.GameHooks`):
a cooperative game's (:class:`~distmarl.runtime.hooks.base.CooperativeHooks`) or a league's
(:class:`~distmarl.runtime.hooks.league.LeagueHooks`). The run never asks which it holds."""
