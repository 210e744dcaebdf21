"""Starting or joining Ray with the settings distmarl's data path wants.

A Ray that distmarl starts itself listens on the loopback interface only: the GCS, the raylet
and its object manager, every worker's gRPC server, the dashboard and its agents. Ray 2.60 has
no bind-address setting for these; they follow the node's address, and ``ray.init`` replaces a
loopback ``_node_ip_address`` by the machine's network address whenever multi-node clusters are
enabled (``ray._private.services.resolve_ip_for_localhost``; on Linux they always are, unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). :func:`loopback_node` turns that off for the one
``ray.init`` call, so the node's address is 127.0.0.1 and each server binds it. The price: no
other machine can join such a Ray; start a cluster with ``ray start`` for that.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

log = logging.getLogger(__name__)

#: Sampled batches (1024 rows of ~160 bytes) travel inline in the reply instead of through the
#: object store: this roughly doubles buffer-actor sample calls/s on a small machine. Only a Ray
#: that distmarl starts itself gets it; on a cluster, start each node with the environment
#: variable RAY_max_direct_call_object_size=1048576 for the same effect.
INLINE_OBJECT_BYTES = 1 << 20
#: where a local Ray's dashboard listens
LOOPBACK = "127.0.0.1"
#: Ray's loggers whose notes at a local start ask nothing of the user: the token it makes for
#: its own local instance (joining a cluster, they stay)
QUIET_AT_LOCAL_START = ("ray._private.authentication.authentication_token_setup",)
#: Ray's notes, while it waits for its node to register, that suggest a setting its wait does
#: not read (a start that times out is said in one line: :class:`RayStartError`)
QUIET_NOTES = (("ray._private.node", "Failed to get node info"),)


#: what Ray's exception says when the node it starts does not register in time (Ray gives
#: the raylet 30 s to register with the GCS; a machine under heavy load misses that)
NODE_START_TIMEOUT = "timed out during startup"


class RayStartError(RuntimeError):
    """The local Ray did not start: one line naming the cause and what to do."""


def local_system_config() -> dict[str, Any]:
    return {"max_direct_call_object_size": INLINE_OBJECT_BYTES}


@contextmanager
def loopback_node() -> Iterator[None]:
    """Within this block a new local Ray node takes the loopback address (and its servers bind
    it) instead of the machine's network address: Ray's own single-machine mode
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), switched on for this process only, since Ray reads
    that variable once, at import."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None, dashboard: bool = True,
             resources: dict[str, float] | None = None, loopback_only: bool = True,
             **kwargs: Any) -> dict[str, Any]:
    """Join the cluster at ``address`` (or ``$RAY_ADDRESS``), or start a local Ray sized to this
    machine.

    A local Ray listens on 127.0.0.1 only (GCS, raylet, object manager, workers, dashboard and
    agents; see the module docstring) unless ``loopback_only=False``, which leaves Ray's default
    (the machine's network address, so other nodes can join; the dashboard stays on loopback
    unless ``dashboard_host`` says otherwise). Returns ``ray.init``'s context as
    a plain dict (address, dashboard URL).
    """
    if ray.is_initialized():
        return {"address": ray.get_runtime_context().gcs_address}
    # Inside a Ray job (and after `ray start`) RAY_ADDRESS names the cluster: join it, since
    # ray.init refuses num_cpus there. An http:// value (the job server) is left to ray.init,
    # whose error says what to do.
    address = cluster_address(address)
    if address:
        ctx = ray.init(address=address, **kwargs)
    else:
        ctx = _start_local(num_cpus=num_cpus, num_gpus=num_gpus, dashboard=dashboard,
                           resources=resources, loopback_only=loopback_only, **kwargs)
    # ray.init returns a RayContext (with address_info); its annotation names the base class
    address_info: dict[str, Any] = ctx.address_info  # type: ignore[attr-defined]
    info = {"address": address_info.get("gcs_address") or address_info.get("address"),
            "dashboard_url": ctx.dashboard_url}
    log.info("ray: %s", info)
    return info


class _QuietLoggers(logging.Filter):
    """Drops the records of :data:`QUIET_AT_LOCAL_START` and :data:`QUIET_NOTES`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name in QUIET_AT_LOCAL_START:
            return False
        return not any(record.name == name and str(record.msg).startswith(start)
                       for name, start in QUIET_NOTES)


def _quiet_local_start_notes() -> None:
    for handler in logging.getLogger("ray").handlers:
        if not any(isinstance(f, _QuietLoggers) for f in handler.filters):
            handler.addFilter(_QuietLoggers())


def _start_local(*, num_cpus: int | None, num_gpus: int | None, dashboard: bool,
                 resources: dict[str, float] | None, loopback_only: bool, **kwargs: Any) -> Any:
    """``ray.init`` of a new local Ray (loopback only unless told otherwise)."""
    _quiet_local_start_notes()
    options: dict[str, Any] = {
        "num_cpus": num_cpus if num_cpus is not None else os.cpu_count(),
        "num_gpus": num_gpus, "resources": resources, "include_dashboard": dashboard,
        "dashboard_host": LOOPBACK, "_system_config": local_system_config(), **kwargs}
    try:
        if not loopback_only:
            return ray.init(**options)
        with loopback_node():
            return ray.init(**options)
    except Exception as err:
        if NODE_START_TIMEOUT not in str(err):
            raise
        raise RayStartError(
            "the local Ray did not start in time: its node did not register with Ray's GCS "
            "within Ray's 30 s (the machine is overloaded, or a Ray process failed to start); "
            "retry when the load is lower, or join a running Ray with --address "
            "(`ray start --head` first)") from None


def cluster_resources(address: str) -> dict[str, float]:
    """The total resources of the Ray cluster at ``address`` (``CPU``, ``GPU``, ...), asked
    by joining it for a moment."""
    init_ray(address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        return {k: float(v) for k, v in ray.cluster_resources().items()}
    finally:
        ray.shutdown()


def cluster_address(address: str | None) -> str | None:
    """The cluster a command joins: ``address``, else ``$RAY_ADDRESS`` (set inside a Ray job
    and after ``ray start``) unless it names a job server (http://); None: none."""
    env = os.environ.get("RAY_ADDRESS", "")
    if address:
        return address
    return env if env and not env.startswith(("http://", "https://")) else None
