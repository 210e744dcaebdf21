"""What a sweep runs: one config, its arms (each a name and the overrides that make it) and
its seeds, every arm with every seed; and the folder that holds it.

Arms come from a grid (``--grid KEY=V1,V2``: every combination, each named ``k=v,k=v``), from
names given with their overrides (``--arm NAME KEY=VALUE ...``), or neither (one arm,
``base``). A sweep's folder holds ``sweep.json`` (the config file and its digest, the sweep's
own ``--set`` overrides, the arms and the seeds) and each run's directory, ``<arm>/seed-<s>``. The same
folder takes the same sweep again (resumed), or more of it: new arms and more seeds are added
to what it holds (``sweep.json`` then names every arm and seed it has taken, run or not yet),
while an arm it holds under other overrides, or another config (by its loaded content: a Ray
job's copy of the file is the same) or ``--set``, is refused.

    plan = SweepPlan.parse("tiny.yaml", "0-2", grid=["training.lr=0.01,0.001"])
    plan = SweepPlan.of("tiny.yaml", [0, 1], {"small": ["population.size=2"], "big": []})
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distmarl.config import ConfigError, load_config

#: the file that says which sweep a folder holds
SWEEP_FILE = "sweep.json"
#: names an arm may not take: the files and folders a sweep's own use
RESERVED = ("report", SWEEP_FILE, "sweep-run.json", "mlflow.db", "mlartifacts")


def parse_seeds(text: str) -> list[int]:
    """``0-4`` / ``0,2,5`` / ``0-2,7`` as seeds; ConfigError naming ``--seeds`` otherwise."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            first, sep, last = part.strip().partition("-")
            seeds += range(int(first), int(last) + 1) if sep else [int(first)]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: write a range (0-4) or a list (0,2,5)") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds {text!r}: each seed once, none negative")
    return seeds


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``KEY=V1,V2`` items as arms, every combination of the values, each named ``k=v,k=v``
    (none without items); ConfigError naming ``--grid`` otherwise."""
    grid: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values or key in grid:
            raise ConfigError(f"--grid {item!r}: write KEY=V1,V2 (each key once)")
        grid[key] = [v.strip() for v in values.split(",")]
    points = [[f"{k}={v}" for k, v in zip(grid, values)]
              for values in itertools.product(*grid.values())] if grid else []
    return {",".join(point): point for point in points}


def parse_arms(items: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    """``--arm NAME KEY=VALUE ...`` items (each a list: the name, then its overrides) as
    arms; ConfigError naming ``--arm`` for a repeated name or an override without ``=``."""
    arms: dict[str, list[str]] = {}
    for name, *sets in items:
        bad = [s for s in sets if "=" not in s]
        if name in arms or bad or "=" in name:
            why = (f"not KEY=VALUE: {bad}" if bad else "the name first, without '='"
                   if "=" in name else f"name {name} twice")
            raise ConfigError(f"--arm {' '.join([name, *sets])}: write NAME KEY=VALUE ... "
                              f"({why})")
        arms[name] = list(sets)
    return arms


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its ``arm``, the arm's ``overrides``, its ``seed`` and its
    directory."""

    arm: str
    overrides: tuple[str, ...]
    seed: int
    run_dir: Path

    @property
    def name(self) -> str:
        return f"{self.arm}/seed-{self.seed}"

    def summary(self) -> dict[str, Any] | None:
        """The run's ``summary.json`` (None before it has ended once)."""
        path = self.run_dir / "summary.json"
        return json.loads(path.read_text()) if path.exists() else None


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep runs: ``config`` with ``sets`` (every run's overrides), each arm of
    ``arms`` (``{name: overrides}``, applied after ``sets``) with each of ``seeds``."""

    config: str
    sets: tuple[str, ...]
    arms: dict[str, list[str]]
    seeds: tuple[int, ...]
    #: the config's SHA-256 as loaded, tracking aside: what names it wherever its file lies
    #: (a Ray job's copy) and however it is written (comments, order)
    digest: str = ""

    @classmethod
    def of(cls, config: str | Path, seeds: Sequence[int],
           arms: Mapping[str, Sequence[str]] | None = None, sets: Sequence[str] = ()
           ) -> SweepPlan:
        """The plan of ``arms`` (None: one, ``base``), every arm's config loaded once: an
        unknown key or a bad value fails here, naming the arm, before anything runs."""
        given = {"base": []} if not arms else {k: list(v) for k, v in arms.items()}
        path = Path(config).resolve()
        plan = cls(str(path), tuple(sets), given, tuple(seeds), config_digest(path))
        for name, overrides in plan.arms.items():
            if not name or "/" in name or name.startswith(".") or name in RESERVED:
                raise ConfigError(f"arm {name!r}: not a folder name an arm may take (no '/', "
                                  f"no leading '.', none of {RESERVED})")
            try:
                load_config(plan.config, [*plan.sets, *overrides])
            except ConfigError as err:
                raise ConfigError(f"arm {name}: {err}") from None
        if not plan.seeds or len(set(plan.seeds)) != len(plan.seeds) or min(plan.seeds) < 0:
            raise ConfigError(f"seeds {list(seeds)}: each seed once, none negative")
        return plan

    @classmethod
    def parse(cls, config: str | Path, seeds: str, grid: Sequence[str] = (),
              sets: Sequence[str] = (), arms: Sequence[Sequence[str]] = ()) -> SweepPlan:
        """The plan of the command line's ``--seeds``, ``--grid`` or ``--arm`` (not both)
        and ``--set``; ConfigError naming the flag."""
        if grid and arms:
            raise ConfigError("--grid and --arm: give the arms one way (--arm names each one)")
        named = parse_arms(arms) if arms else parse_grid(grid)
        load_config(config, list(sets))  # a bad config or --set is named as itself
        try:
            return cls.of(config, parse_seeds(seeds), named, sets)
        except ConfigError as err:
            raise ConfigError(f"{'--arm' if arms else '--grid point'}: {err}") from None

    def runs(self, out: Path) -> list[SweepRun]:
        """Every run, seed by seed (a sweep stopped part way has its arms paired on the
        seeds it finished), its directory under the sweep's folder ``out``."""
        return [SweepRun(arm, tuple(sets), seed, out / arm / f"seed-{seed}")
                for seed in self.seeds for arm, sets in self.arms.items()]

    def run_sets(self, run: SweepRun) -> list[str]:
        """A run's ``--set`` values: the sweep's, its arm's, its seed."""
        return [*self.sets, *run.overrides, f"seed={run.seed}"]

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "sets": list(self.sets), "arms": self.arms,
                "seeds": list(self.seeds), "digest": self.digest}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepPlan:
        """A plan as :meth:`to_json` wrote it (or as a grid: ``{"grid": {key: values}}``)."""
        arms = data.get("arms")
        if arms is None:  # the grid form
            grid = [f"{k}={','.join(v)}" for k, v in data.get("grid", {}).items()]
            arms = parse_grid(grid) if grid else {"base": []}
        return cls(data["config"], tuple(data["sets"]), dict(arms), tuple(data["seeds"]),
                   data.get("digest", ""))

    def same_config(self, other: SweepPlan) -> bool:
        """Whether ``other`` trains the same config (by :func:`config_digest` where both know
        it, else by path) with the same ``--set``."""
        same_file = (self.digest == other.digest if self.digest and other.digest
                     else self.config == other.config)
        return same_file and self.sets == other.sets


def config_digest(path: Path) -> str:
    """The SHA-256 of the config at ``path`` as loaded, its ``tracking`` aside (where the runs
    are recorded does not make them other runs); empty where there is no such file."""
    if not path.is_file():
        return ""
    loaded = load_config(path).model_dump(mode="json")
    loaded.pop("tracking", None)
    return hashlib.sha256(json.dumps(loaded, sort_keys=True).encode()).hexdigest()


def folder_plan(out: Path) -> SweepPlan:
    """The plan of everything the sweep folder ``out`` holds; ConfigError naming ``--out``
    where it holds no sweep."""
    marker = out / SWEEP_FILE
    if not marker.exists():
        raise ConfigError(f"--out {out}: no sweep there (no {SWEEP_FILE})")
    return SweepPlan.from_json(json.loads(marker.read_text()))


def claim(out: Path, plan: SweepPlan) -> SweepPlan:
    """Make ``out`` this sweep's folder: a new or empty one, or one of the same config and
    ``--set`` whose arms named alike have the same overrides (resumed, and extended by the
    plan's new arms and seeds); ConfigError naming ``--out`` where it holds something else.
    Returns the plan of everything the folder now holds."""
    marker = out / SWEEP_FILE
    if not marker.exists():
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"--out {out} is not empty and holds no sweep: give a new folder")
        out.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(plan.to_json(), indent=1))
        return plan
    held = folder_plan(out)
    if not held.same_config(plan):
        what = "--set" if held.sets != plan.sets else "config"
        raise ConfigError(f"--out {out} holds another sweep's runs (its {what} differs: "
                          f"{held.config} with --set {list(held.sets)}): give another folder, "
                          "or the same config and --set to resume or extend it")
    for name in set(held.arms) & set(plan.arms):
        if held.arms[name] != plan.arms[name]:
            raise ConfigError(f"--out {out} holds arm {name} run with {held.arms[name]}, not "
                              f"{plan.arms[name]}: give another folder or arm name")
    merged = SweepPlan(plan.config, plan.sets, {**held.arms, **plan.arms},
                       tuple(sorted({*held.seeds, *plan.seeds})), plan.digest)
    if merged != held:
        marker.write_text(json.dumps(merged.to_json(), indent=1))
    return merged
