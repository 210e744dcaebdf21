"""Single-process trainers, one per algorithm family: the readable reference path.

One member, one process, no Ray and no MLflow, the same parts as the distributed runtime
(vectorised env, collector, replay buffer, algorithm). Each trainer reads top to bottom, as a
CleanRL script does; benchmarks use them as the baseline the runtime is measured against.

    from distmarl import load_config
    from distmarl.local import train_local

    result = train_local(load_config("examples/configs/tiny.yaml"), steps=2_000, eval_every=500)
    result.history, result.updates, result.algo.state_dict()
"""

from __future__ import annotations

from distmarl.config import ExperimentConfig
from distmarl.config.hparams import on_policy
from distmarl.local.offpolicy import train_off_policy
from distmarl.local.onpolicy import SPREAD_IPPO, train_on_policy
from distmarl.local.result import LocalResult

__all__ = ["SPREAD_IPPO", "LocalResult", "train_local", "train_off_policy", "train_on_policy"]


def train_local(cfg: ExperimentConfig, steps: int, seed: int | None = None,
                eval_every: int = 0, log: bool = True) -> LocalResult:
    """Train one member of ``cfg`` with its family's trainer (:func:`train_on_policy` for
    on-policy algorithms, else :func:`train_off_policy`); arguments as theirs."""
    trainer = train_on_policy if on_policy(cfg.algorithm.name) else train_off_policy
    return trainer(cfg, steps, seed, eval_every, log)
