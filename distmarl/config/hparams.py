"""Each algorithm's hyperparameters as a typed model, and the one checker built on them.

The models hold AgileRL's names, the defaults and the rules (as ``Field`` constraints). Every
place that takes hyperparameters checks them here: the config (``algorithm.hp``, when the YAML
is loaded), the algorithms' constructors and ``set_hyperparameter``, and the HPO search spaces
(``evolution.hp_config``: names and ranges).

``batch_size`` and ``learn_step`` are read by whoever samples and schedules (the runtime, or a
single-process loop), but live here so HPO mutates one set of values. Off-policy, ``learn_step``
is env steps per update; on-policy, it is the rollout fragment length in *vectorised* steps (a
fragment holds ``learn_step * num_envs`` transitions per agent).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

import annotated_types as at
import numpy as np
from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from distmarl.config.section import Section, closest


def _number(value: Any) -> Any:
    """Numbers only (numpy scalars become Python ones); a string or a bool is not a number."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError("not a number")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _switch(value: Any) -> bool:
    """``true`` or ``false`` only (numpy's too); 0 and 1 are numbers, not switches."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError("not a bool")
    return bool(value)


#: An integer hyperparameter (a float with no fraction, such as ``3.0``, counts as one).
Int = Annotated[int, BeforeValidator(_number)]
#: A real-valued hyperparameter.
Real = Annotated[float, BeforeValidator(_number)]
#: An on/off hyperparameter.
Switch = Annotated[bool, BeforeValidator(_switch)]


def rule(field: FieldInfo) -> str:
    """What a field accepts, in words: ``an int >= 1``, ``> 0``, ``within [0, 1]``."""
    types = get_args(field.annotation) or (field.annotation,)
    if bool in types:
        return "true or false"
    lower = next((m for m in field.metadata if isinstance(m, at.Ge | at.Gt)), None)
    upper = next((m for m in field.metadata if isinstance(m, at.Le | at.Lt)), None)
    if lower is not None and upper is not None:
        text = (f"within {'[' if isinstance(lower, at.Ge) else '('}{_bound(lower)}, "
                f"{_bound(upper)}{']' if isinstance(upper, at.Le) else ')'}")
    elif lower is not None:
        text = f"{'>=' if isinstance(lower, at.Ge) else '>'} {_bound(lower)}"
    else:
        text = "a number"
    if int in types:
        text = "an int" + ("" if lower is None else f" {text}")
    return text + (" or null" if type(None) in types else "")


def _bound(limit: at.Ge | at.Gt | at.Le | at.Lt) -> object:
    """The number of a bound constraint."""
    if isinstance(limit, at.Ge):
        return limit.ge
    if isinstance(limit, at.Gt):
        return limit.gt
    return limit.le if isinstance(limit, at.Le) else limit.lt


class Hyperparameters(Section):
    """Base of the per-algorithm models. A value that breaks its field's rule is reported as
    ``must be <rule>`` (the rule from :func:`rule`), the same words wherever it is checked.
    Every algorithm has ``batch_size`` and ``learn_step`` (each model gives its default).
    ``on_policy``: the algorithm's family, the one place it is declared: on-policy members
    learn once from whole fragments of their own rollouts, the others from replayed rows."""

    on_policy: ClassVar[bool] = False

    batch_size: Int = Field(ge=1, description="transitions per learner update (minibatch)")
    learn_step: Int = Field(ge=1, description="env steps per update (off-policy) or per fragment (on-policy)")

    @field_validator("*", mode="wrap")
    @classmethod
    def _rule(cls, value: Any, handler: ValidatorFunctionWrapHandler,
              info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError:
            field = cls.model_fields[str(info.field_name)]
            raise PydanticCustomError("hyperparameter", "must be {rule}",
                                      {"rule": rule(field)}) from None

    def as_dict(self) -> dict[str, Any]:
        """Every hyperparameter by name: the plain dict algorithms and HPO work with."""
        return self.model_dump()


class MADDPGHyperparameters(Hyperparameters):
    """MADDPG's hyperparameters and AgileRL's defaults. ``max_grad_norm`` and ``actor_reg`` are
    not AgileRL's but the original MADDPG code's stabilisers."""

    ELSEWHERE: ClassVar[dict[str, str]] = {
        "lr": "MADDPG and MATD3 have two learning rates: set lr_actor and lr_critic "
              "(AgileRL's LR_ACTOR and LR_CRITIC)"}

    batch_size: Int = Field(64, ge=1, description="transitions per learner update")
    lr_actor: Real = Field(1e-3, gt=0, description="actor learning rate")
    lr_critic: Real = Field(1e-2, gt=0, description="critic learning rate")
    learn_step: Int = Field(5, ge=1, description="env steps per learner update")
    gamma: Real = Field(0.95, ge=0, le=1, description="discount factor")
    tau: Real = Field(0.01, gt=0, le=1, description="soft update rate of the target networks")
    O_U_noise: Switch = Field(True, description="Ornstein-Uhlenbeck exploration noise (false: Gaussian)")
    expl_noise: Real = Field(0.1, ge=0, description="scale of the exploration noise")
    mean_noise: Real = Field(0.0, description="mean of the exploration noise")
    theta: Real = Field(0.15, ge=0, description="Ornstein-Uhlenbeck mean reversion rate")
    dt: Real = Field(1e-2, gt=0, description="Ornstein-Uhlenbeck time step")
    max_grad_norm: Real = Field(0.0, ge=0, description="clip each network's gradient norm to this (0: off)")
    actor_reg: Real = Field(0.0, ge=0, description="weight of an L2 penalty on the actor's pre-tanh outputs / logits, which keeps them from saturating (0: off)")
    replay_ratio: Real | None = Field(None, gt=0, lt=1, description="this member's share of replayed rows per batch, the rest its newest unseen rows (null: replay.replay_ratio; null there too: replay only, no new rows first)")
    prioritized_replay_alpha: Real | None = Field(None, ge=0, description="this member's priority exponent (null: replay.prioritized_replay_alpha)")
    prioritized_replay_beta: Real | None = Field(None, ge=0, le=1, description="this member's importance-weight exponent (null: replay.prioritized_replay_beta)")


class MATD3Hyperparameters(MADDPGHyperparameters):
    """MADDPG's and TD3's delayed actor updates and target policy smoothing."""

    policy_freq: Int = Field(2, ge=1, description="critic updates per actor update")
    policy_noise: Real = Field(0.2, ge=0, description="target policy smoothing noise, in units of the action half-range")
    noise_clip: Real = Field(0.5, ge=0, description="clip of the smoothing noise, in units of the action half-range")


class IPPOHyperparameters(Hyperparameters):
    """IPPO's (and MAPPO's) hyperparameters: CleanRL's PPO values, with a fragment sized for
    25-step MPE episodes and 8 sub-envs (128 steps * 8 envs = 1024 transitions per agent).
    ``value_norm`` is fixed when the learner is built."""

    on_policy: ClassVar[bool] = True

    batch_size: Int = Field(256, ge=1, description="minibatch size of one gradient step")
    lr: Real = Field(3e-4, gt=0, description="learning rate")
    learn_step: Int = Field(128, ge=1, description="rollout fragment length in vectorised env steps")
    gamma: Real = Field(0.99, ge=0, le=1, description="discount factor")
    gae_lambda: Real = Field(0.95, ge=0, le=1, description="GAE lambda")
    clip_coef: Real = Field(0.2, ge=0, description="PPO clip range of the probability ratio")
    ent_coef: Real = Field(0.01, ge=0, description="entropy bonus weight")
    vf_coef: Real = Field(0.5, ge=0, description="value loss weight")
    max_grad_norm: Real = Field(0.5, gt=0, description="clip of the gradient norm")
    update_epochs: Int = Field(4, ge=1, description="passes over each fragment")
    target_kl: Real | None = Field(None, ge=0, description="stop a fragment's epochs early at this approximate KL (null: never)")
    value_norm: Switch = Field(True, description="normalise value targets with running moments")


class MAPPOHyperparameters(IPPOHyperparameters):
    """IPPO's and ``global_state``: the value networks read the env's ``env.state()`` where the
    env has one (fixed when the learner is built)."""

    global_state: Switch = Field(True, description="value networks read the env's global state (where it has one)")


#: Each algorithm's hyperparameter model, by ``algorithm.name``.
HP_MODELS: dict[str, type[Hyperparameters]] = {
    "MADDPG": MADDPGHyperparameters,
    "MATD3": MATD3Hyperparameters,
    "IPPO": IPPOHyperparameters,
    "MAPPO": MAPPOHyperparameters,
}


def hp_model(algorithm: str) -> type[Hyperparameters]:
    """The hyperparameter model of ``algorithm``; ValueError naming the known ones if none."""
    try:
        return HP_MODELS[algorithm]
    except KeyError:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {sorted(HP_MODELS)}") from None


def on_policy(algorithm: str) -> bool:
    """Whether members of ``algorithm`` learn on-policy (from whole fragments of their own
    rollouts, read once) rather than from replayed rows."""
    return hp_model(algorithm).on_policy


def default_hp(algorithm: str) -> dict[str, Any]:
    """Every hyperparameter of ``algorithm`` with its default (a fresh dict)."""
    return hp_model(algorithm).model_validate({}).as_dict()


def hp_switches(algorithm: str) -> frozenset[str]:
    """The on/off hyperparameters of ``algorithm`` (nothing for a search to perturb)."""
    return frozenset(name for name, field in hp_model(algorithm).model_fields.items()
                     if field.annotation is bool)


def check_hp_value(algorithm: str, name: str, value: Any) -> Any:
    """``value`` as stored (ints stay ints, None where allowed), or ValueError naming the
    hyperparameter, its rule and the value."""
    model = hp_model(algorithm)
    if name not in model.model_fields:
        near = closest(name, sorted(model.model_fields))
        hint = f" (did you mean {near!r}?)" if near else ""
        raise ValueError(f"{algorithm} has no hyperparameter {name!r}{hint}; it has "
                         f"{sorted(model.model_fields)}")
    try:
        return getattr(model.model_validate({name: value}), name)
    except ValidationError as err:
        raise ValueError(f"{algorithm} hyperparameter {name} {err.errors()[0]['msg']}, "
                         f"got {value!r}") from None


def check_search_ranges(algorithm: str, ranges: Mapping[str, tuple[float, float]]) -> None:
    """ValueError unless every ``name -> (min, max)`` search range names a hyperparameter of
    ``algorithm`` (naming the valid ones) that is not an on/off switch (nothing to perturb),
    with ``min`` and ``max`` that pass its rule. Each rule is an interval, so every value a
    mutation can reach (clipped to ``[min, max]``) passes it too."""
    known = default_hp(algorithm)
    unknown = [n for n in ranges if n not in known]
    if unknown:
        hints = hp_model(algorithm).ELSEWHERE
        said = "".join(f" ({n}: {hints[n]})" for n in unknown if n in hints)
        raise ValueError(f"hyperparameter(s) {unknown} are not hyperparameters of "
                         f"{algorithm}{said}; it has {sorted(known)}")
    switches = [n for n in ranges if n in hp_switches(algorithm)]
    if switches:
        raise ValueError(f"hyperparameter(s) {switches} of {algorithm} are on/off switches and "
                         f"cannot be mutated; remove them from the mutable hyperparameters")
    for name, (low, high) in ranges.items():
        for bound in (low, high):
            try:
                check_hp_value(algorithm, name, bound)
            except ValueError as err:
                raise ValueError(f"the search range [{low}, {high}] of {name}: {err}") from None


#: How a searched hyperparameter's values are kept: whole numbers, or real ones.
SearchDtype = Literal["int", "float"]


def _base_types(annotation: Any) -> set[Any]:
    """The plain types of an annotation: ``Annotated`` and unions unwrapped."""
    if get_origin(annotation) is Annotated:
        return _base_types(get_args(annotation)[0])
    args = get_args(annotation)
    return set().union(*(_base_types(a) for a in args)) if args else {annotation}


def hp_dtype(algorithm: str, name: str) -> SearchDtype | None:
    """``int`` for an integer hyperparameter of ``algorithm`` (``batch_size``,
    ``learn_step``, ...), ``float`` for a real-valued one, None for an on/off switch or a
    name it does not have."""
    field = hp_model(algorithm).model_fields.get(name)
    if field is None:
        return None
    types = _base_types(field.annotation)
    if bool in types:
        return None
    return "int" if int in types else "float"


def search_dtypes(algorithms: Sequence[str], given: Mapping[str, SearchDtype | None]
                  ) -> dict[str, SearchDtype]:
    """Each searched hyperparameter's dtype (``given``: name -> the range's ``dtype``, None
    where the config leaves it out): the hyperparameter's own type in ``algorithms`` (a
    mixed population's), so an integer one mutates to integers without being told. A given
    dtype must be that type (ValueError naming ``evolution.hp_config.<name>``): a float
    range of an integer hyperparameter would mutate it to fractions (``learn_step`` 6.4),
    an int range of a real one would round it. Names none of ``algorithms`` has are left
    out (the range checks name them)."""
    out: dict[str, SearchDtype] = {}
    for name, dtype in given.items():
        declared = {a: d for a in algorithms if (d := hp_dtype(a, name)) is not None}
        kinds = set(declared.values())
        if len(kinds) > 1:
            raise ValueError(f"evolution.hp_config.{name}: {name} is an int in some of the "
                             f"population's algorithms and a float in others ({declared})")
        if not kinds:
            continue
        kind = kinds.pop()
        if dtype is not None and dtype != kind:
            what = ("an integer" if kind == "int" else "a real-valued")
            raise ValueError(f"evolution.hp_config.{name}: dtype {dtype}, but {name} is "
                             f"{what} hyperparameter of {', '.join(sorted(declared))}; leave "
                             f"dtype out (it follows the hyperparameter) or set dtype: {kind}")
        out[name] = kind
    return out


def check_hp(algorithm: str, hp: Mapping[str, Any] | None) -> dict[str, Any]:
    """``algorithm``'s defaults overridden by ``hp`` (any subset), every value checked."""
    out = default_hp(algorithm)
    for name, value in (hp or {}).items():
        out[name] = check_hp_value(algorithm, name, value)
    return out
