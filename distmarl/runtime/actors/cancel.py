"""A rollout worker's stop on Ray: its play stops when the coordinator cancels the call.

A Ray actor's running task is not interrupted by ``ray.cancel``: for a regular or threaded
actor Ray sets a flag the task reads with ``ray.get_runtime_context().is_canceled()``. The Ray
fleet cancels the play calls in flight once the run is asked to stop; the worker's play, which
asks its :class:`~distmarl.collect.cancel.Cancel` before every env step, then stops within a
step (:class:`~distmarl.collect.cancel.Cancelled`).
"""

from __future__ import annotations

import ray

__all__ = ["RayTaskCancel"]


class RayTaskCancel:
    """Set once ``ray.cancel`` was called on the actor task that asks (a
    :class:`~distmarl.collect.cancel.Cancel`; only within a Ray actor's task)."""

    def is_set(self) -> bool:
        return bool(ray.get_runtime_context().is_canceled())
