"""Starting or joining Ray with the settings distmarl's data path wants."""

from __future__ import annotations

import logging
import os
from typing import Any

import ray

log = logging.getLogger(__name__)

#: Sampled batches (1024 rows of ~160 bytes) travel inline in the reply instead of through the
#: object store: this roughly doubles buffer-actor sample calls/s on a small machine. Only a Ray
#: that distmarl starts itself gets it; on a cluster, start each node with the environment
#: variable RAY_max_direct_call_object_size=1048576 for the same effect.
INLINE_OBJECT_BYTES = 1 << 20


def local_system_config() -> dict[str, Any]:
    return {"max_direct_call_object_size": INLINE_OBJECT_BYTES}


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None, dashboard: bool = True,
             resources: dict[str, float] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Join the cluster at ``address`` (or ``$RAY_ADDRESS``), or start a local Ray sized to this
    machine.

    A local Ray listens on 127.0.0.1 only (head, object manager and dashboard). Returns
    ``ray.init``'s context as a plain dict (address, dashboard URL).
    """
    if ray.is_initialized():
        return {"address": ray.get_runtime_context().gcs_address}
    # Inside a Ray job (and after `ray start`) RAY_ADDRESS names the cluster: join it, since
    # ray.init refuses num_cpus there. An http:// value (the job server) is left to ray.init,
    # whose error says what to do.
    env_address = os.environ.get("RAY_ADDRESS", "")
    if not address and env_address and not env_address.startswith(("http://", "https://")):
        address = env_address
    if address:
        ctx = ray.init(address=address, **kwargs)
    else:
        ctx = ray.init(
            num_cpus=num_cpus if num_cpus is not None else os.cpu_count(),
            num_gpus=num_gpus,
            resources=resources,
            include_dashboard=dashboard,
            dashboard_host="127.0.0.1",
            _system_config=local_system_config(),
            **kwargs,
        )
    info = {"address": ctx.address_info.get("gcs_address") or ctx.address_info.get("address"),
            "dashboard_url": ctx.dashboard_url}
    log.info("ray: %s", info)
    return info
