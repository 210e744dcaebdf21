"""How much memory a buffer of an env's transitions takes, before any row is written.

A buffer row holds one env step of every agent: per agent, each stored field's value, as the
buffer stores it (float64 as float32, everything else as it comes; see
:func:`distmarl.buffers.schema.storage_dtype`). The buffer's rings are allocated whole but
filled lazily, so a capacity the machine cannot hold fails only when the ring fills, perhaps
hours in; :func:`buffer_memory_problem` says so before the run starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from gymnasium import spaces

from distmarl.envs.spaces import space_leaves

#: Fields holding an observation of the agent (their bytes are the observation space's).
OBS_FIELDS = frozenset({"obs", "next_obs"})
#: Bytes of the one-value fields: flags are bool, values and log-probabilities float32,
#: ``n_steps`` an int64 count; ``reward`` is float32 per env step the row spans.
SCALAR_BYTES: dict[str, int] = {"terminated": 1, "truncated": 1, "active": 1, "log_prob": 4,
                                "value": 4, "next_value": 4, "n_steps": 8}
#: Bytes a ring keeps per row besides the fields (the member that wrote it, int32).
#: Prioritised replay's sum-trees (per learner) are not counted.
ROW_OVERHEAD = 4
#: cgroup files that cap a container's memory (v2, then v1).
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def space_nbytes(space: spaces.Space) -> int:
    """Bytes one value of ``space`` takes in a buffer (every leaf, float64 stored as
    float32)."""
    total = 0
    for leaf in space_leaves(space):
        itemsize = 4 if leaf.dtype == np.float64 else leaf.dtype.itemsize
        total += math.prod(leaf.shape) * itemsize
    return total


def row_bytes(fields: Sequence[str], observation_spaces: Mapping[str, spaces.Space],
              action_spaces: Mapping[str, spaces.Space], state_space: spaces.Space | None = None,
              row_steps: int = 1) -> int:
    """Bytes of one buffer row of ``fields`` for every agent of ``observation_spaces``
    (``state``: the env's global state, stored under every agent; ``row_steps``: the env steps
    an n-step row's ``reward`` spans)."""
    total = ROW_OVERHEAD
    for agent, obs_space in observation_spaces.items():
        for name in fields:
            total += _field_bytes(name, obs_space, action_spaces[agent], state_space, row_steps)
    return total


def _field_bytes(name: str, obs_space: spaces.Space, act_space: spaces.Space,
                 state_space: spaces.Space | None, row_steps: int) -> int:
    if name in OBS_FIELDS:
        return space_nbytes(obs_space)
    if name == "action":
        return space_nbytes(act_space)
    if name == "state":
        return 0 if state_space is None else space_nbytes(state_space)
    if name == "reward":
        return 4 * row_steps
    return SCALAR_BYTES.get(name, 8)


def machine_memory() -> int:
    """Bytes of memory this machine (or the container it runs in) has."""
    physical = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    return min([physical, *(_cgroup_limit(Path(p)) for p in CGROUP_LIMITS)])


def _cgroup_limit(path: Path) -> int:
    try:
        text = path.read_text().strip()
    except OSError:
        return 2**63
    return int(text) if text.isdigit() else 2**63


def buffer_memory_problem(capacity: int, nbytes_per_row: int, memory: int,
                          agents: int) -> str | None:
    """Why a buffer of ``capacity`` rows of ``nbytes_per_row`` bytes (of ``agents`` agents)
    cannot fit in ``memory`` bytes; None when it fits."""
    total = capacity * nbytes_per_row
    if total <= memory:
        return None
    return (f"buffer.capacity {capacity} rows x about {_size(nbytes_per_row)} per row (one env "
            f"step of {agents} agents) = {_size(total)}, more than this machine's memory "
            f"({_size(memory)}); at most {memory // nbytes_per_row} rows fit")


def _size(n: int) -> str:
    """``n`` bytes for people: ``3.8 KB``, ``61.2 GB``."""
    value = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"
