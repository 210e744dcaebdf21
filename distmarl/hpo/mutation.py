"""Mutation plans (AgileRL's ``Mutations`` options and meanings), decided in pure code.

``Mutations.draw`` draws one mutation per member from the normalised probabilities and returns
plain data; :func:`distmarl.hpo.apply.apply_mutation` carries a plan out on an algorithm. Every
plan holds its own ``seed``, so the same plan gives the same network change wherever it runs
(in a learner actor on another node, or in a local loop).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distmarl.config import MutationConfig
from distmarl.hpo.hyperparams import HyperparameterConfig

KINDS = ("none", "architecture", "parameters", "activation", "rl_hp")
LAYER_METHODS = ("add_layer", "remove_layer")
NODE_METHODS = ("add_node", "remove_node")
DEFAULT_ACTIVATIONS = ("ReLU", "ELU", "GELU")


@dataclass(frozen=True)
class MutationPlan:
    """One member's mutation: ``kind`` in :data:`KINDS`, what exactly in ``detail``."""

    member: int
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "kind": self.kind, "detail": dict(self.detail), "seed": self.seed}

    def describe(self) -> str:
        """A short label for lineage plots: ``rl_hp:lr_actor``, ``architecture:add_layer``."""
        extra = self.detail.get("method") or self.detail.get("hp")
        return f"{self.kind}:{extra}" if extra else self.kind


class Mutations:
    """Which mutation each member gets (AgileRL's option names).

    :param no_mutation, architecture, parameters, activation, rl_hp: relative probabilities
        (normalised to sum to one) of each kind.
    :param new_layer_prob: within ``architecture``, the probability of a layer change
        (add or remove a layer) rather than a node change (add or remove nodes).
    :param mutation_sd: scale of the Gaussian noise of ``parameters`` mutations.
    :param activation_selection: activations an ``activation`` mutation chooses from.
    :param mutate_elite: whether the elite may mutate too.
    :param rand_seed: seed of the generator used when :meth:`plan` gets none.
    """

    def __init__(self, no_mutation: float, architecture: float, new_layer_prob: float,
                 parameters: float, activation: float, rl_hp: float, mutation_sd: float = 0.1,
                 activation_selection: Sequence[str] | None = None, mutate_elite: bool = True,
                 rand_seed: int | None = None) -> None:
        probs = np.array([no_mutation, architecture, parameters, activation, rl_hp], dtype=float)
        if (probs < 0).any() or probs.sum() <= 0:
            raise ValueError(f"mutation probabilities must be >= 0 and not all 0, got "
                             f"{dict(zip(KINDS, probs.tolist()))}")
        if not 0.0 <= new_layer_prob <= 1.0:
            raise ValueError(f"new_layer_prob must be in [0, 1], got {new_layer_prob}")
        if mutation_sd < 0:
            raise ValueError(f"mutation_sd must be >= 0, got {mutation_sd}")
        self.probs = probs / probs.sum()
        self.new_layer_prob = float(new_layer_prob)
        self.mutation_sd = float(mutation_sd)
        self.activation_selection = tuple(activation_selection or DEFAULT_ACTIVATIONS)
        self.mutate_elite = bool(mutate_elite)
        self.rng = np.random.default_rng(rand_seed)

    @classmethod
    def from_config(cls, cfg: MutationConfig, rand_seed: int | None = None) -> Mutations:
        """The mutations ``evolution.mutation`` describes."""
        return cls(cfg.no_mutation, cfg.architecture, cfg.new_layer_prob, cfg.parameters,
                   cfg.activation, cfg.rl_hp, cfg.mutation_sd, cfg.activation_selection,
                   cfg.mutate_elite, rand_seed)

    def draw(self, hps: Sequence[Mapping[str, Any]], hp_config: HyperparameterConfig | None,
             rng: np.random.Generator | None = None,
             elite: int | Collection[int] | None = None,
             force: bool = False) -> list[MutationPlan]:
        """One plan per member; ``hps[m]`` are the hyperparameters member ``m`` holds (after
        selection's copies). ``force`` excludes ``none`` (the pre-training pass mutates every
        member once); the elite (a league: every side's) gets ``none`` unless
        ``mutate_elite``."""
        rng = self.rng if rng is None else rng
        kept = set() if elite is None else {elite} if isinstance(elite, int) else set(elite)
        probs = self.probs.copy()
        if force:
            probs[0] = 0.0
            if probs.sum() == 0:
                raise ValueError("a forced mutation pass needs a non-zero mutation probability")
            probs /= probs.sum()
        if hp_config is None or len(hp_config) == 0:  # nothing to mutate for rl_hp
            probs[4] = 0.0
            probs = probs / probs.sum() if probs.sum() > 0 else np.eye(5)[0]
        plans = []
        for member, hp in enumerate(hps):
            if member in kept and not self.mutate_elite:
                plans.append(MutationPlan(member, "none", {}, int(rng.integers(2**31))))
                continue
            kind = KINDS[int(rng.choice(len(KINDS), p=probs))]
            plans.append(self._plan_one(member, kind, hp, hp_config, rng))
        return plans

    def _plan_one(self, member: int, kind: str, hp: Mapping[str, Any],
                  hp_config: HyperparameterConfig | None, rng: np.random.Generator) -> MutationPlan:
        detail: dict[str, Any] = {}
        if kind == "architecture":
            methods = LAYER_METHODS if rng.random() < self.new_layer_prob else NODE_METHODS
            detail = {"method": methods[int(rng.integers(2))]}
        elif kind == "parameters":
            detail = {"mutation_sd": self.mutation_sd}
        elif kind == "activation":
            detail = {"choices": list(self.activation_selection)}
        elif kind == "rl_hp":
            assert hp_config is not None
            name = hp_config.names()[int(rng.integers(len(hp_config)))]
            if name not in hp:
                raise ValueError(f"member {member} has no hyperparameter '{name}' (has {sorted(hp)})")
            new = hp_config[name].mutate(hp[name], rng)
            detail = {"hp": name, "old": hp[name], "new": new}
        return MutationPlan(member, kind, detail, int(rng.integers(2**31)))
