"""Carrying out a :class:`MutationPlan` on an algorithm (any :class:`Algorithm`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distmarl.hpo.mutation import MutationPlan


def apply_mutation(algo: Any, plan: MutationPlan) -> dict[str, Any]:
    """Mutate ``algo`` in place as ``plan`` says; returns what changed (plain data).

    Randomness comes from ``plan.seed`` only, so a plan gives the same result wherever it runs.
    """
    rng = np.random.default_rng(plan.seed)
    if plan.kind == "none":
        return {"kind": "none"}
    if plan.kind == "architecture":
        return {**algo.mutate_architecture(plan.detail["method"], rng), "kind": plan.kind}
    if plan.kind == "parameters":
        return {**algo.mutate_parameters(plan.detail["mutation_sd"], rng), "kind": plan.kind}
    if plan.kind == "activation":
        return {**algo.mutate_activation(rng, plan.detail.get("choices")), "kind": plan.kind}
    if plan.kind == "rl_hp":
        name, value = plan.detail["hp"], plan.detail["new"]
        algo.set_hyperparameter(name, value)
        return {"kind": plan.kind, "hp": name, "old": plan.detail["old"], "new": value}
    raise ValueError(f"unknown mutation kind {plan.kind!r}")
