"""Vectorised PettingZoo parallel envs (no Ray, no MLflow).

``make_env`` turns a spec into a parallel env; ``VectorParallelEnv`` steps many copies with
same-step autoreset and true final observations (``true_next_obs``), placeholders and masks for
dying / turn-taking agents, and AgileRL-style env-defined actions (``apply_env_defined_actions``).
"""

from distmarl.envs.errors import (
    ClosedEnvError,
    EnvSpecError,
    MissingPackageError,
    NonFiniteError,
    SubEnvError,
)
from distmarl.envs.infos import (
    apply_env_defined_actions,
    fold_info_masks,
    true_next_obs,
    true_next_state,
)
from distmarl.envs.make import EnvFactory, make_env, make_vector_env, to_parallel
from distmarl.envs.preprocess import WrapperSpec, parse_wrappers
from distmarl.envs.vector import VectorParallelEnv

__all__ = [
    "ClosedEnvError",
    "EnvFactory",
    "EnvSpecError",
    "MissingPackageError",
    "NonFiniteError",
    "SubEnvError",
    "VectorParallelEnv",
    "WrapperSpec",
    "apply_env_defined_actions",
    "fold_info_masks",
    "make_env",
    "make_vector_env",
    "parse_wrappers",
    "to_parallel",
    "true_next_obs",
    "true_next_state",
]
