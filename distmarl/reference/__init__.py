"""The reference trainer, one per algorithm family: one member, one process, no Ray, no MLflow.

It uses the same parts as a population run (vectorised env, collector, replay buffer,
algorithm) and the same update-to-data rule (:class:`~distmarl.config.replay.UpdateRule`),
without a population, evolution or tracking. Each trainer reads top to bottom, as a CleanRL
script does; benchmarks use them as the baseline a run is measured against. (A whole
population in one process is ``distmarl train --local``, not this.)

    from distmarl import load_config
    from distmarl.reference import train_reference

    result = train_reference(load_config("examples/configs/tiny.yaml"), steps=2_000,
                             eval_every=500)
    result.history, result.updates, result.algo.state_dict()
"""

from __future__ import annotations

from distmarl.config import ExperimentConfig
from distmarl.config.hparams import on_policy
from distmarl.reference.offpolicy import train_off_policy
from distmarl.reference.onpolicy import SPREAD_IPPO, train_on_policy
from distmarl.reference.result import ReferenceResult

__all__ = ["SPREAD_IPPO", "ReferenceResult", "train_off_policy", "train_on_policy",
           "train_reference"]


def train_reference(cfg: ExperimentConfig, steps: int, seed: int | None = None,
                    eval_every: int = 0, log: bool = True) -> ReferenceResult:
    """Train one member of ``cfg`` with its family's trainer (:func:`train_on_policy` for
    on-policy algorithms, else :func:`train_off_policy`); arguments as theirs."""
    trainer = train_on_policy if on_policy(cfg.algorithm.name) else train_off_policy
    return trainer(cfg, steps, seed, eval_every, log)
