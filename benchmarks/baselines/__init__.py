"""Third-party baselines (AgileRL, RLlib) measured in the same run as distmarl.

They need the ``.venv-bench`` environment (agilerl 2.58, ray[rllib] 2.60); see
:mod:`benchmarks.baselines.agilerl_runner`. The functions are loaded lazily, so that
``python -m benchmarks.baselines.agilerl_runner`` does not import the module twice.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "agilerl_available",
    "run_agilerl_buffer_add",
    "run_agilerl_maddpg",
    "run_rllib_buffer_add",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from benchmarks.baselines import agilerl_runner

        return getattr(agilerl_runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
