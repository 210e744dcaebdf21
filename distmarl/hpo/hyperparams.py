"""Hyperparameter search spaces: ``RLParameter`` and ``HyperparameterConfig`` (AgileRL's names),
checked against an algorithm's hyperparameters by :mod:`distmarl.config.hparams`.

A mutation multiplies the current value by ``grow_factor`` or ``shrink_factor`` with equal odds
and clips to ``[min, max]``. An ``int`` parameter stays a Python ``int`` (rounded after the
multiplication, then clipped), so ``batch_size=64`` becomes 77 or 51, never 76.8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distmarl.config.hparams import check_search_ranges, search_dtypes

Number = int | float


@dataclass(frozen=True)
class RLParameter:
    """The range and step of one mutable hyperparameter."""

    min: Number
    max: Number
    grow_factor: float = 1.2
    shrink_factor: float = 0.8
    dtype: type = float

    def __post_init__(self) -> None:
        if self.dtype not in (int, float):
            raise ValueError(f"RLParameter dtype must be int or float, got {self.dtype!r}")
        if self.min > self.max:
            raise ValueError(f"RLParameter min {self.min} is greater than max {self.max}")
        for name in ("grow_factor", "shrink_factor"):
            if not getattr(self, name) > 0:
                raise ValueError(f"RLParameter {name} must be > 0, got {getattr(self, name)}")

    def clip(self, value: Number) -> Number:
        """``value`` as this parameter's dtype, within ``[min, max]``."""
        clipped = min(max(value, self.min), self.max)
        return int(np.rint(clipped)) if self.dtype is int else float(clipped)

    def mutate(self, value: Number, rng: np.random.Generator) -> Number:
        """Grow or shrink ``value`` (equal odds), then round (int) and clip."""
        factor = self.grow_factor if rng.random() < 0.5 else self.shrink_factor
        return self.clip(value * factor)

    def sample(self, rng: np.random.Generator) -> Number:
        """A value drawn from ``[min, max]``: log-uniform when ``min > 0`` (rates and sizes
        span orders of magnitude, and a uniform draw would almost never give a small one),
        else uniform; rounded (int) and clipped."""
        if self.min > 0:
            value = float(np.exp(rng.uniform(np.log(self.min), np.log(self.max))))
        else:
            value = float(rng.uniform(self.min, self.max))
        return self.clip(value)

    def to_json(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "grow_factor": self.grow_factor,
                "shrink_factor": self.shrink_factor, "dtype": self.dtype.__name__}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> RLParameter:
        dtype = {"int": int, "float": float}.get(str(d.get("dtype", "float")))
        if dtype is None:
            raise ValueError(f"RLParameter dtype must be 'int' or 'float', got {d.get('dtype')!r}")
        return RLParameter(d["min"], d["max"], d.get("grow_factor", 1.2),
                           d.get("shrink_factor", 0.8), dtype)


class HyperparameterConfig:
    """The hyperparameters that ``rl_hp`` mutations may change, by name."""

    def __init__(self, **params: RLParameter) -> None:
        for name, param in params.items():
            if not isinstance(param, RLParameter):
                raise ValueError(f"hyperparameter '{name}' must be an RLParameter, got {param!r}")
        self.params: dict[str, RLParameter] = dict(params)

    def __contains__(self, name: object) -> bool:
        return name in self.params

    def __getitem__(self, name: str) -> RLParameter:
        return self.params[name]

    def __len__(self) -> int:
        return len(self.params)

    def names(self) -> list[str]:
        return list(self.params)

    def sample(self, size: int, rng: np.random.Generator) -> list[dict[str, Number]]:
        """``size`` sets of values, each parameter drawn by :meth:`RLParameter.sample` (a
        population's diverse start)."""
        return [{name: p.sample(rng) for name, p in self.params.items()} for _ in range(size)]

    def check_against(self, algorithm: str) -> None:
        """ValueError unless these ranges fit ``algorithm``'s hyperparameters
        (:func:`~distmarl.config.hparams.check_search_ranges`), each with its
        hyperparameter's dtype (an integer one needs ``dtype=int``:
        :func:`~distmarl.config.hparams.search_dtypes`)."""
        check_search_ranges(algorithm, {n: (p.min, p.max) for n, p in self.params.items()})
        search_dtypes([algorithm], {n: "int" if p.dtype is int else "float"
                                    for n, p in self.params.items()})

    def to_json(self) -> dict[str, Any]:
        return {name: p.to_json() for name, p in self.params.items()}

    @staticmethod
    def from_json(d: Mapping[str, Mapping[str, Any]]) -> HyperparameterConfig:
        return HyperparameterConfig(**{n: RLParameter.from_json(p) for n, p in d.items()})
