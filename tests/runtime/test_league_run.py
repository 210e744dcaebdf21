"""League runs in process (``train(cfg, local=True)``): connect four, one population taking
both seats against each other, frozen snapshots and references; fitness is each member's
rating. An asymmetric league: a population per side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config

C4 = Path(__file__).resolve().parents[2] / "examples" / "configs" / "connect_four_ippo.yaml"


@pytest.mark.slow
def test_a_symmetric_league_rates_its_members_and_keeps_snapshots(tmp_path: Path) -> None:
    """Generations of one fragment (64 steps x 2 sub-envs) per member: ratings, rated games
    and snapshots (the oldest dropped past ``max_snapshots``) add up, and come back on
    resume."""
    from distmarl.runtime.driver.trainer import train

    sets = [f"tracking.directory={tmp_path}", "tracking.mlflow=false", "env.num_envs=2",
            "population.size=3", "evolution.evo_steps=128", "evolution.final_episodes=0",
            "league={symmetric: true, references: [random, lookahead], eval_games: 4, "
            "snapshot_every: 1, max_snapshots: 2}"]
    cfg = load_config(C4, [*sets, "training.max_steps_per_member=256"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert summary["stop_reason"] == "max_steps" and summary["generations"] == 2
    fitness = [m["fitness"] for m in summary["members"]]
    # ratings (OpenSkill ordinals from a prior of 25 - 3 * 8.33 = 0), not summed scores (0)
    assert all(len(f) == 2 and all(np.isfinite(f)) for f in fitness)
    assert all(abs(x) > 1.0 for f in fitness for x in f)
    assert len({round(f[-1], 6) for f in fitness}) > 1  # members told apart
    league = summary["league"]
    # 3 members x 4 games x 2 references and 2 rivals, 2 generations
    assert league["rated_games"] == 3 * 4 * 4 * 2
    assert league["snapshots"] == ["snapshot/1", "snapshot/2"]
    assert league["ratings"]["ref/random"] == pytest.approx(0.0)  # the anchor never moves
    # resume: the league's ratings, record and snapshots (with their weights) come back
    again = train(load_config(C4, [*sets, "training.max_steps_per_member=384",
                                   "evolution.final_episodes=2", "tracking.mlflow=true",
                                   "tracking.video_every_generations=1"]),
                  resume=str(tmp_path / "run"), show_progress=False, local=True)
    check_league_tables(again)
    import imageio

    # the elite's games against random moves (at the end, and after the resumed run's one
    # generation) and against the lookahead reference: a frame per move and the reset
    videos = Path(again["run_dir"]) / "videos"
    assert sorted(p.name for p in videos.iterdir()) == [
        "elite.gif", "elite_vs_lookahead.gif", "generation_3.gif"]
    for gif in videos.iterdir():
        frames = imageio.mimread(gif)
        assert len(frames) > 7 and frames[0].shape == frames[-1].shape
    assert again["generations"] == 3 and again["resumed_from"]
    assert again["league"]["rated_games"] == league["rated_games"] + 3 * 4 * 4
    check_final_games(again)
    # snapshots join after every generation but a run's last (as selection does): 0-2 before
    # the resume (the newest 2 held), none after the resumed run's one generation
    assert again["league"]["snapshots"] == league["snapshots"]
    assert set(again["league"]["ratings"]) == set(league["ratings"])


def check_league_tables(summary: dict) -> None:
    """The parent MLflow run holds the league's ratings and win-rate matrix as tables."""
    import os

    import mlflow
    from mlflow.tracking import MlflowClient

    try:
        client = MlflowClient(summary["mlflow"]["uri"])
        parent = summary["mlflow"]["parent"]
        files = {a.path for a in client.list_artifacts(parent, "league")}
        assert {"league/ratings.json", "league/win_rates.json"} <= files
        logged = client.get_run(parent).data.tags["mlflow.loggedArtifacts"]
        assert '"league/win_rates.json"' in logged and '"table"' in logged
    finally:  # the elite model's logging set a process-wide tracking URI: later runs' own
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]
        os.environ.pop("MLFLOW_TRACKING_URI", None)


def check_final_games(summary: dict) -> None:
    """The final games: every member against both references, random play against them; the
    elite's rows are what ``distmarl evaluate`` plays again from the last checkpoint."""
    from distmarl.cli import result_line
    from distmarl.collect.evaluation import evaluate_checkpoint
    from distmarl.league.saved import evaluate_saved

    elite = summary["elite"]
    assert summary["final_elites"] == {"player_0": elite}
    last = [m["fitness"][-1] for m in summary["members"]]
    assert last[elite] == max(last)  # eval_loop 1: the elite is the best rated now
    rows = summary["final_games"]
    assert [(r["player"], r["opponent"], r["kind"], r["games"]) for r in rows] == [
        *[(f"member/{i}", ref, "member", 2.0) for i in range(3)
          for ref in ("ref/lookahead", "ref/random")],
        ("ref/random", "ref/lookahead", "baseline", 2.0),
        ("ref/random", "ref/random", "baseline", 2.0)]
    for r in rows:
        assert r["win"] + r["draw"] + r["loss"] == pytest.approx(1.0)
    mine = [r for r in rows if r["player"] == f"member/{elite}"]
    assert summary["final_score"] == pytest.approx(np.mean([r["score"] for r in mine]))
    assert "won/drew/lost against ref/lookahead" in result_line(summary)
    again = evaluate_saved(Path(summary["checkpoint"]))
    assert again["member"] == elite and again["score"] == pytest.approx(summary["final_score"])
    assert [{k: r[k] for k in ("opponent", "win", "draw", "loss")} for r in again["opponents"]] \
        == [{k: r[k] for k in ("opponent", "win", "draw", "loss")} for r in mine]
    with pytest.raises(ValueError, match="a league run's member plays games"):
        evaluate_checkpoint(Path(summary["checkpoint"]))


@pytest.mark.slow
def test_an_asymmetric_league_has_a_population_per_side(tmp_path: Path) -> None:
    from distmarl.cli import result_line
    from distmarl.runtime.driver.trainer import train

    tiny = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
    cfg = load_config(tiny, [
        f"tracking.directory={tmp_path}",
        "env={spec: 'mpe2:simple_tag_v3', kwargs: {max_cycles: 25, continuous_actions: false}}",
        "evolution.evo_steps=200", "evolution.final_episodes=2", "training.max_steps_per_member=400",
        "evolution.mutation={no_mutation: 1.0, architecture: 0.0, parameters: 0.0, rl_hp: 0.0}",
        "league={sides: {predators: [adversary], prey: [agent]}, references: [random, flee], "
        "eval_games: 2, win_above: {predators: 0}, opponent_epsilon: 0.2, "
        "opponents: [{source: reference, share: 0.5}, {source: current, share: 0.25}, "
        "{source: snapshot, share: 0.25}]}"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert len(summary["members"]) == 4 and summary["generations"] == 2
    league = summary["league"]
    assert league["sides"]["prey"] == ["agent_0"]
    # predators meet 2 prey references and 2 prey members, prey 1 reference and 2 predators:
    # (2 x 4 + 2 x 3) x 2 games per generation
    assert league["rated_games"] == (2 * 4 + 2 * 3) * 2 * 2
    assert {"member/0", "member/3", "ref/flee", "ref/random"} <= set(league["ratings"])
    for copy in summary["copies"]:  # members 0-1 hunt, 2-3 flee: copies never cross
        assert (copy["member"] < 2) == (copy["source"] < 2)
    assert (tmp_path / "run" / "win_rates.png").exists()
    # final games: each side's elite, the elites against each other, random predators
    # against the fleeing prey (the baseline the trained predators are read against)
    elites = summary["final_elites"]
    assert set(elites) == {"predators", "prey"} and elites["predators"] < 2 <= elites["prey"]
    kinds = {(r["player"], r["opponent"], r["kind"]) for r in summary["final_games"]}
    assert (f"member/{elites['predators']}", f"member/{elites['prey']}", "elites") in kinds
    assert ("ref/random", "ref/flee", "baseline") in kinds
    assert "(predators) won/drew/lost against ref/flee" in result_line(summary)
    import imageio  # the elites chasing each other, the predators' elite chasing ref/flee

    videos = tmp_path / "run" / "videos"
    assert sorted(p.name for p in videos.iterdir()) == ["elite.gif", "predators_vs_flee.gif"]
    assert all(len(imageio.mimread(gif)) > 20 for gif in videos.iterdir())  # 25 steps
