"""Watching a member: ``distmarl play`` renders a trained member's greedy episodes into a
video whose frames are the episodes' steps, and a tracked run logs the elite's GIF."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import imageio
import numpy as np

from distmarl.cli import main

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
C4 = Path(__file__).resolve().parents[2] / "examples" / "configs" / "connect_four_ippo.yaml"


def trained(tmp_path: Path, config: Path = TINY, *sets: str) -> Path:
    """A short in-process run's checkpoints folder."""
    from distmarl.config import load_config
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(config, [f"tracking.directory={tmp_path}", "tracking.mlflow=false",
                               "training.max_steps_per_member=400", *sets])
    train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    return tmp_path / "run" / "checkpoints"


def test_play_writes_every_step_of_every_episode(tmp_path: Path, capsys) -> None:
    checkpoints = trained(tmp_path)
    gif = tmp_path / "watch" / "elite.gif"
    assert main(["play", str(checkpoints), "--episodes", "2", "--video", str(gif)]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["steps"] == [25, 25] and len(said["returns"]) == 2
    assert said["returns"][0] != said["returns"][1]  # seeds 0 and 1: two episodes
    frames = imageio.mimread(gif)
    assert len(frames) == 2 * (25 + 1)  # each reset and each step
    assert frames[0].shape[:2] == (700, 700) and np.ptp(frames[0]) > 0  # mpe2's drawing
    mp4 = tmp_path / "watch" / "elite.mp4"
    code = main(["play", str(checkpoints), "--video", str(mp4)])
    if importlib.util.find_spec("imageio_ffmpeg") is not None:
        assert code == 0 and imageio.get_reader(mp4).count_frames() == 26
    else:
        assert code == 2 and "imageio-ffmpeg" in capsys.readouterr().err


def test_play_refuses_what_it_cannot_write_before_playing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere"
    assert main(["play", str(missing), "--video", str(tmp_path / "x.avi")]) == 2
    err = capsys.readouterr().err
    assert "--video" in err and "x.avi: name a .gif or .mp4 file" in err
    assert main(["play", str(missing), "--episodes", "0"]) == 2
    assert "--episodes 0" in capsys.readouterr().err
    assert main(["play", str(missing)]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_a_masked_turn_based_game_plays_legal_moves(tmp_path: Path, capsys) -> None:
    """Connect four: the member's seats move by its policy, masks honoured; a game ends."""
    from distmarl.collect.evaluation import load_member
    from distmarl.collect.play import play

    checkpoints = trained(tmp_path, C4, "population.size=2", "env.num_envs=2",
                          "training.max_steps_per_member=128", "evolution.evo_steps=64",
                          "evolution.final_episodes=0")
    cfg, algo, _, _ = load_member(checkpoints)
    played = play(cfg, [algo], episodes=3, seed=0)
    assert len(played.returns) == 3 and all(7 <= s <= 42 for s in played.steps)
    assert len(played.frames) == sum(played.steps) + 3


def test_each_member_plays_only_its_seats() -> None:
    """simple_tag's predators by one member, its prey by another (each holds every agent's
    networks, as a league's members do): each is asked to act for its own side only."""
    from distmarl.collect.play import play
    from distmarl.config import load_config
    from distmarl.factory import env_spaces, make_algorithm

    cfg = load_config(TINY.with_name("simple_tag_maddpg_league.yaml"))
    spaces = env_spaces(cfg.env)
    asked: list[set[str]] = [set(), set()]

    def spy(k: int) -> object:
        algo = make_algorithm(cfg.algorithm, spaces, seed=k)
        act = algo.act

        def recording(obs, **kwargs):
            asked[k] |= set(obs)
            return act(obs, **kwargs)
        algo.act = recording  # type: ignore[method-assign]
        return algo

    predators = ["adversary_0", "adversary_1", "adversary_2"]
    played = play(cfg, [spy(0), spy(1)], seats=[predators, ["agent_0"]])
    assert asked == [set(predators), {"agent_0"}] and played.steps[0] > 0


def test_a_scripted_player_given_no_seats_plays_every_agent() -> None:
    """A reference (``act`` alone, no ``agents``) with no seats named is asked for every
    agent of the env."""
    from distmarl.collect.evaluation import RandomPolicy
    from distmarl.collect.play import play
    from distmarl.config import load_config
    from distmarl.factory import env_spaces

    cfg = load_config(TINY)
    random_play = RandomPolicy(env_spaces(cfg.env).action, seed=0)
    asked: set[str] = set()
    act = random_play.act

    def recording(obs, **kwargs):
        asked.update(obs)
        return act(obs, **kwargs)
    random_play.act = recording  # type: ignore[method-assign]
    played = play(cfg, [random_play], episodes=1)
    assert asked == {"speaker_0", "listener_0"} and played.steps[0] > 0
