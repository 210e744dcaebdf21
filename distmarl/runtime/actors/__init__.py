"""The processes that carry out the coordinator's calls, and the shells they run.

A shell is a plain object holding one role's core objects (a member's learner, a rollout
worker, the replay buffer); an actor runs shells in its own process: the buffer and rollout
worker actors one shell each, a ``HostActor`` the learner shells of a group of members and,
colocated, their first rollout workers. The in-process fleet holds the same shells without
actors.
"""
