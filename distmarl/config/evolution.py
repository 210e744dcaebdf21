"""The ``evolution`` section: one model per ``evolution.mode``, each with only its own fields.

Every mode evaluates members at their boundaries and scores them at the end (the common fields
of :class:`EvolutionBase`); what else a mode reads is its own: ``sync`` its tournaments,
``async`` the shares that copy and are copied, ``multi_frequency`` its sub-populations and
migration, ``independent`` nothing more. A file or ``--set`` that switches the mode leaves out
the keys its base had for the old one (:func:`keys_of_mode`); a key of another mode written
beside the mode is dropped with a warning naming the modes that read it, so a setting that does
nothing never passes silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from distmarl.config.section import Section

__all__ = ["EVOLUTION_MODES", "AsyncEvolution", "EvolutionBase", "EvolutionConfig",
           "IndependentEvolution", "MultiFrequencyEvolution", "MutationConfig",
           "RLParameterConfig", "SubpopulationConfig", "SyncEvolution", "TournamentConfig",
           "keys_of_mode"]


class RLParameterConfig(Section):
    min: float = Field(description="lower bound")
    max: float = Field(description="upper bound")
    grow_factor: float = Field(1.2, gt=0, description="factor of a growing mutation")
    shrink_factor: float = Field(0.8, gt=0, description="factor of a shrinking mutation")
    dtype: Literal["int", "float"] | None = Field(None, description="int: values stay whole numbers; null: the hyperparameter's own type (int for batch_size, learn_step, policy_freq, update_epochs; float for the others), filled in when the config loads. A dtype that contradicts the hyperparameter's type is refused")

    @model_validator(mode="after")
    def _ordered(self) -> RLParameterConfig:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self


class TournamentConfig(Section):
    size: int = Field(2, ge=1, description="members drawn per tournament")
    elitism: bool = Field(True, description="keep the best member unchanged")


class MutationConfig(Section):
    no_mutation: float = Field(0.4, ge=0, description="relative probability of no mutation")
    architecture: float = Field(0.2, ge=0, description="relative probability of an architecture mutation")
    new_layer_prob: float = Field(0.2, ge=0, le=1, description="within architecture: layer (vs node) change")
    parameters: float = Field(0.2, ge=0, description="relative probability of Gaussian weight noise")
    activation: float = Field(0.0, ge=0, description="relative probability of an activation switch")
    rl_hp: float = Field(0.2, ge=0, description="relative probability of a hyperparameter mutation")
    mutation_sd: float = Field(0.1, ge=0, description="scale of the weight noise")
    activation_selection: list[str] = Field(default_factory=lambda: ["ReLU", "ELU", "GELU"],
                                            description="activations to choose from")
    mutate_elite: bool = Field(True, description="whether the elite may mutate")
    pretrain_mutation: bool = Field(False, description="mutate every member once before training")


class SubpopulationConfig(Section):
    size: int = Field(ge=1, description="members of this sub-population")
    evo_steps: int = Field(ge=1, description="env steps per member between its evolution steps")


class EvolutionBase(Section):
    """What every mode has."""

    mode: str
    initial_hp: Literal["config", "sampled"] = Field("config", description="config: every member starts from algorithm.hp (AgileRL); sampled: each member's hp_config hyperparameters are drawn from their ranges (log-uniform for positive ranges), as PBT and random search start")
    evo_steps: int = Field(10_000, ge=1, description="env steps per member between evolution steps")
    eval_steps: int | None = Field(None, ge=1, description="max env steps of each fitness evaluation, tighter than env.max_episode_steps: episodes still running then count with their partial scores, and later ones are not played (None: whole episodes, each ending by env.max_episode_steps at the latest)")
    eval_episodes: int = Field(4, ge=1, description="evaluation episodes per sub-env per fitness value (all members of a generation play the same episodes)")
    eval_explore: bool = Field(False, description="evaluate (fitness and final score) by sampling each member's policy, as AgileRL's PPO tests do, instead of its deterministic action (mean / arg-max); sampling restarts from each evaluation's seed. Suits on-policy members whose stochastic policy is what learned (in pistonball an arg-max policy moves every piston alike)")
    eval_loop: int = Field(1, ge=1, description="fitness = mean of the last eval_loop evaluations")
    final_episodes: int = Field(100, ge=0, description="episodes of the final evaluation of every member on a fixed set (seeded by final_seed), beside a random policy on the same episodes; the elite's is the run's final_score (0: none)")
    final_seed: int = Field(12345, ge=0, description="seed of the final evaluation's episodes (the same set for every run of an env config)")
    mutation: MutationConfig = Field(default_factory=MutationConfig)
    hp_config: dict[str, RLParameterConfig] = Field(default_factory=dict, description="hyperparameters rl_hp mutations search, with their ranges")


class SyncEvolution(EvolutionBase):
    """Generation-synchronous tournaments (AgileRL's evolutionary HPO)."""

    mode: Literal["sync"] = Field("sync", description="generation-synchronous tournaments, asynchronous exploit/explore (async), independent members (evaluated at each boundary, never selected, copied or mutated: evolution off), or multiple-frequencies PBT (multi_frequency: subpopulations evolving at their own evo_steps, with migration); each mode has only its own keys")
    tournament: TournamentConfig = Field(default_factory=TournamentConfig)


class _Exploiting(EvolutionBase):
    """The modes where the worst share of members copies the best share (PBT's exploit)."""

    bottom_frac: float = Field(0.25, gt=0, le=0.5, description="async and multi_frequency modes: share of members that copy")
    top_frac: float = Field(0.25, gt=0, le=0.5, description="async and multi_frequency modes: share they copy from")


class AsyncEvolution(_Exploiting):
    """Asynchronous exploit / explore (PBT): each member evolves at its own boundary."""

    mode: Literal["async"] = Field(description="see evolution.mode (written: a section without one is sync)")


class IndependentEvolution(EvolutionBase):
    """Members trained apart: evaluated at each boundary, never selected, copied or mutated."""

    mode: Literal["independent"] = Field(description="see evolution.mode (written: a section without one is sync)")


class MultiFrequencyEvolution(_Exploiting):
    """Multiple-frequencies PBT: sub-populations evolving at their own ``evo_steps``."""

    mode: Literal["multi_frequency"] = Field(description="see evolution.mode (written: a section without one is sync)")
    subpopulations: list[SubpopulationConfig] = Field(description="multi_frequency mode: sub-populations, fastest first (evo_steps increasing), sizes adding up to population.size; each evolves when its members reach their boundary: bottom_frac of its members clone one of its top_frac, and migration_frac of open slots take better members of other sub-populations")
    migration_frac: float = Field(0.25, ge=0, le=0.5, description="multi_frequency mode: share of each sub-population open to migrants (just above its losers)")


#: Each mode's model, by ``evolution.mode``.
EVOLUTION_MODES: dict[str, type[EvolutionBase]] = {
    "sync": SyncEvolution, "async": AsyncEvolution, "independent": IndependentEvolution,
    "multi_frequency": MultiFrequencyEvolution,
}


def _other_modes(mode: str) -> dict[str, str]:
    """Keys of the other modes that ``mode`` lacks -> which modes read them (the warning's
    words when one is written for ``mode``)."""
    own = set(EVOLUTION_MODES[mode].model_fields)
    out: dict[str, list[str]] = {}
    for other, cls in EVOLUTION_MODES.items():
        for key in cls.model_fields:
            if key not in own:
                out.setdefault(key, []).append(other)
    return {k: f"a key of evolution.mode {' and '.join(modes)}, which mode {mode} does not read"
            for k, modes in out.items()}


for _mode, _cls in EVOLUTION_MODES.items():
    _cls.FOREIGN = _other_modes(_mode)


def keys_of_mode(evolution: Mapping[str, Any], mode: Any) -> dict[str, Any]:
    """``evolution`` (raw config data) with only the keys ``mode`` reads (all of them for a
    mode no model has: validation names it): what is left of a base file's section, or the
    config's, when a file or an override switches the mode."""
    model = EVOLUTION_MODES.get(mode) if isinstance(mode, str) else None
    if model is None:
        return dict(evolution)
    return {k: v for k, v in evolution.items() if k in model.model_fields}


def _evolution_mode(value: Any) -> Any:
    """The discriminator: ``mode`` of a mapping (sync when it names none) or of a model."""
    if isinstance(value, Mapping):
        return value.get("mode", "sync")
    return getattr(value, "mode", None)


#: The ``evolution`` section: one of :data:`EVOLUTION_MODES`, chosen by its ``mode``.
EvolutionConfig = Annotated[
    Annotated[SyncEvolution, Tag("sync")] | Annotated[AsyncEvolution, Tag("async")]
    | Annotated[IndependentEvolution, Tag("independent")]
    | Annotated[MultiFrequencyEvolution, Tag("multi_frequency")],
    Discriminator(_evolution_mode),
]
