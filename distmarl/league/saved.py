"""A saved league member's final games again, from a checkpoint (no Ray): ``distmarl
evaluate`` on a league run.

The games are the run's final evaluation's for that member
(:func:`~distmarl.league.final.member_games`: every reference of the sides it meets, each
seeded by its own seed, references made afresh with it), on as many sub-envs as the run had,
so the run's last checkpoint gives its final figures again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distmarl.collect.evaluation import final_defaults, load_member, score_member
from distmarl.config import ExperimentConfig
from distmarl.factory import env_spaces, make_venv
from distmarl.league.final import final_rows, member_games, pooled
from distmarl.league.references import make_reference
from distmarl.league.seating import play_games
from distmarl.league.setup import league_setup

__all__ = ["evaluate_league_member", "evaluate_saved"]


def evaluate_saved(path: Path, episodes: int | None = None, member: int | None = None,
                   seed: int | None = None) -> dict[str, Any]:
    """``distmarl evaluate``: a saved member (default: the run's elite) on the run's final
    evaluation again: a league member's games against the references, or a cooperative
    member's score on fixed episodes
    (:func:`~distmarl.collect.evaluation.evaluate_checkpoint`)."""
    cfg, algo, index, where = load_member(path, member, seed)
    if not cfg.league.enabled:
        return score_member(cfg, algo, index, where, episodes, seed)
    games, seed = final_defaults(cfg, episodes, seed)
    return {"checkpoint": where, **evaluate_league_member(cfg, algo, index, games, seed)}


def evaluate_league_member(cfg: ExperimentConfig, algo: Any, member: int, games: int,
                           seed: int) -> dict[str, Any]:
    """Member ``member`` (``algo``, its weights loaded) against every reference it meets:
    ``games`` games each, seeded from ``seed`` as the final evaluation seeds them; its side,
    one row per reference (win / draw / loss rates, games the step limit cut) and its
    pooled score rate."""
    spaces = env_spaces(cfg.env)
    setup = league_setup(cfg, spaces)
    if setup is None:
        raise ValueError("the checkpoint's config has no league (league.sides or "
                         "league.symmetric)")
    if not 0 <= member < len(setup.league.side_of_member):
        raise ValueError(f"--member {member} is not a member of the league "
                         f"(0..{len(setup.league.side_of_member) - 1})")
    plan = member_games(setup.league, member, seed)
    explore = cfg.evolution.eval_explore
    venv = make_venv(cfg.env, mode="sync", seed=seed)
    results, capped = [], []
    try:
        for g in plan:
            agents = setup.sides.agents[g.opponent_side]
            ref = make_reference(g.opponent.removeprefix("ref/"), agents, spaces[0], spaces[1],
                                 cfg.env.kwargs, g.seed)
            if explore:
                algo.reseed(g.seed)
            res = play_games(venv, setup.sides, g.side, (g.learner, algo), (g.opponent, ref),
                             games, g.seed, explore, cfg.league.win_above)
            results.append([r for *_, r in res])
            capped.append(res.capped)
    finally:
        venv.close()
    rows = final_rows(plan, results, capped)
    score, stderr = pooled(rows)
    return {"member": member, "side": setup.league.side_of_member[member], "games": games,
            "seed": seed, "score": score, "score_stderr": stderr, "capped": sum(capped),
            "opponents": rows}
