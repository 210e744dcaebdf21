"""A game that never ends, trained with a symmetric league in process: the run
finishes, its league games end at ``env.max_episode_steps`` as draws, and the summary counts
them (generation evaluations and the final games' rows)."""

from __future__ import annotations

from pathlib import Path

from distmarl.config import load_config

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


def test_an_endless_league_game_finishes_and_reports_its_draws(tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(TINY, [
        "env.spec=tests.envs.toy_envs:EndlessEnv", "env.kwargs={}", "env.max_episode_steps=20",
        "league.symmetric=true", "league.eval_games=4", "evolution.final_episodes=4",
        "training.max_steps_per_member=200", "evolution.evo_steps=100", "tracking.mlflow=false",
        f"tracking.directory={tmp_path}"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert summary["stop_reason"] == "max_steps"
    capped = summary["league"]["capped_games"]
    # 2 generations x 2 members x (the other member + random) x 4 games, every one cut
    assert capped["evaluation"] == 2 * 2 * 2 * 4
    rows = summary["final_games"]
    assert rows and all(r["capped"] == r["games"] == 4 and r["draw"] == 1.0 for r in rows)
    events = [e for e in summary["events"] if e.get("evaluation") == "league evaluation"]
    assert events and all(sum(e["capped_episodes"].values()) > 0 for e in events)
