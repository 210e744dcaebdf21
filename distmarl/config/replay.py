"""Members' replay settings: the buffer's values as each member's starting hyperparameters.

``replay_ratio`` and prioritised replay's ``alpha`` / ``beta`` are read per sample call, so
each off-policy member can hold its own (``algorithm.hp``) and ``evolution.hp_config`` can
mutate them like a learning rate. A member's value left null starts from the ``buffer``
section's; a setting the run cannot use is an error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from distmarl.config.hparams import hp_model

#: Env steps a row spans when ``buffer.n_step`` is left null, for members that replay
#: (MADDPG, MATD3; with prioritised replay on by default too).
DEFAULT_N_STEP = 3
#: The off-policy hyperparameters a member's buffer reads take from, by ``buffer`` field.
REPLAY_HP = ("replay_ratio", "prioritized_replay_alpha", "prioritized_replay_beta")


def replays(algorithm: str) -> bool:
    """Whether members of ``algorithm`` learn from replayed rows (they have replay settings)."""
    return set(REPLAY_HP) <= set(hp_model(algorithm).model_fields)


def check_n_step(algorithm: str, n_step: int) -> None:
    """ValueError for n-step rows on an algorithm that learns from its own fragments."""
    if n_step > 1 and not replays(algorithm):
        raise ValueError(f"buffer.n_step {n_step}: {algorithm} members learn from whole "
                         "fragments with GAE (gae_lambda); n-step rows are for MADDPG and MATD3")


def replay_hp(algorithm: str, hp: Mapping[str, Any], buffer_ratio: float | None,
              prioritized: Mapping[str, float] | None, searched: Set[str]) -> dict[str, Any]:
    """The replay hyperparameters ``hp`` leaves null, filled from the buffer's values
    (``buffer_ratio``; ``prioritized``: ``{alpha, beta, eps}``, None when prioritised replay is
    off).

    ValueError: prioritised replay on an algorithm without replay (IPPO, MAPPO read their own
    fragments in order); a member's ``alpha`` / ``beta`` (set or searched) without
    prioritised replay; a searched ``replay_ratio`` with no starting value (uniform replay).
    """
    if not replays(algorithm):
        if prioritized is not None:
            raise ValueError(f"buffer.prioritized_replay: {algorithm} members read their own "
                             "fragments in order, once; prioritised replay is for MADDPG and "
                             "MATD3")
        return {}
    out: dict[str, Any] = {}
    for name, key in zip(REPLAY_HP[1:], ("alpha", "beta"), strict=True):
        if prioritized is None and (hp[name] is not None or name in searched):
            where = ("evolution.hp_config" if name in searched else "algorithm.hp")
            raise ValueError(f"{where}.{name}: set buffer.prioritized_replay: true first (this "
                             "run replays uniformly)")
        if prioritized is not None and hp[name] is None:
            out[name] = prioritized[key]
    if hp["replay_ratio"] is None:
        if "replay_ratio" in searched and buffer_ratio is None:
            raise ValueError("evolution.hp_config.replay_ratio: members need a starting value "
                             "to mutate; set buffer.replay_ratio or algorithm.hp.replay_ratio "
                             "(null: uniform replay)")
        if buffer_ratio is not None:
            out["replay_ratio"] = buffer_ratio
    return out
