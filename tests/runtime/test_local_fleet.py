"""The whole population in one process (``train(cfg, local=True)``, ``distmarl train --local``):
every example config trains, shortened; a seeded run repeats exactly; no Ray is started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distmarl.config import ExperimentConfig, MultiFrequencyEvolution, load_config
from distmarl.runtime.driver.trainer import train

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.yaml"))
#: summary keys that differ between two runs of one seed: clocks, paths and tracking ids
UNREPEATABLE = {"wall_seconds", "setup_seconds", "setup_phases", "env_steps_per_s", "run_dir",
                "checkpoint", "mlflow", "elite_model_uri", "generation_marks", "tracking", "time",
                "checkpoints"}


def shortened(path: Path, tmp: Path, *extra: str) -> ExperimentConfig:
    """``path``'s config cut to two generations of a hundred or so env steps, two sub-envs,
    one-episode evaluations and, in pistonball, 4 pistons (``extra``: more overrides)."""
    cfg = load_config(path)
    on_policy = cfg.algorithm.name in ("IPPO", "MAPPO")
    step = 16 * 2 if on_policy else 96  # env steps per boundary: whole fragments on-policy
    sets = [f"tracking.directory={tmp}", "tracking.mlflow=false", "env.num_envs=2",
            "env.max_episode_steps=30", f"evolution.evo_steps={step}",
            f"training.max_steps_per_member={2 * step}", "evolution.eval_episodes=1",
            "evolution.eval_steps=30", "evolution.final_episodes=1"]
    if on_policy:
        sets += ["algorithm.hp.learn_step=16", "algorithm.hp.batch_size=16"]
    else:
        sets += ["replay.learning_starts=32", "algorithm.hp.batch_size=16",
                 "training.chunk_steps=8"]
    if isinstance(cfg.evolution, MultiFrequencyEvolution):
        sizes = [s.size for s in cfg.evolution.subpopulations]
        subs = ", ".join(f"{{size: {n}, evo_steps: {step * (k + 1)}}}"
                         for k, n in enumerate(sizes))
        sets += [f"evolution.subpopulations=[{subs}]",
                 f"training.max_steps_per_member={step * len(sizes)}"]
    if cfg.league.sides is not None or cfg.league.symmetric:
        sets += ["league.eval_games=2"]
    if "n_pistons" in cfg.env.kwargs:  # pistonball: 4 agents' images a step instead of 20
        sets += ["env.kwargs.n_pistons=4"]
    return load_config(path, [*sets, *extra])


def repeatable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in UNREPEATABLE}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_example_config_trains_in_process(path: Path, tmp_path: Path) -> None:
    """Every example, shortened, with all its members on one learner: each feature (leagues,
    mixed algorithms, multiple frequencies, prioritised n-step replay, images, masks) works
    with members sharing a learner (one member per learner is every other test's layout)."""
    cfg = shortened(path, tmp_path, "population.members_per_learner=64")
    assert_trained(cfg, train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True))


def assert_trained(cfg: ExperimentConfig, summary: dict[str, Any]) -> None:
    """A shortened run ended at its step limit having evolved, learned, scored and saved."""
    assert summary["stop_reason"] == "max_steps"
    assert summary["env_steps"] >= cfg.training.max_steps_per_member * cfg.num_members
    assert summary["generations"] >= 1
    assert summary["updates"] > 0
    assert summary["final_score"] is not None or summary.get("final_games")
    assert Path(summary["checkpoint"]).exists()
    assert_time_counted(summary["time"])


def assert_time_counted(shares: dict[str, dict[str, float]]) -> None:
    """Every kind of actor counted its time: shares of it, the learners' and workers' adding
    up to all of it, the learners' updating within their busy time."""
    assert set(shares) == {"learner", "rollout", "buffer", "coordinator"}
    for kind in ("learner", "rollout"):
        parts = shares[kind]
        assert sum(parts[k] for k in ("busy", "waiting_data", "waiting_coordinator")) \
            == pytest.approx(1.0)
        assert all(0.0 <= v <= 1.0 for v in parts.values()), parts
    assert 0 < shares["learner"]["updating"] <= shares["learner"]["busy"]
    assert shares["rollout"]["busy"] > 0 and 0 < shares["coordinator"]["busy"] < 1


@pytest.mark.slow
def test_a_seeded_run_repeats_exactly(tmp_path: Path) -> None:
    """Two runs of one config and seed give the same summary (clocks, paths and ids aside):
    the same episodes, updates, fitness, copies, mutations and final scores."""
    cfg = shortened(ROOT / "examples" / "configs" / "tiny.yaml", tmp_path)
    first, again = (train(cfg, run_dir=tmp_path / name, show_progress=False, local=True)
                    for name in ("a", "b"))
    assert repeatable(first) == repeatable(again)
    assert first["copies"] and first["events"], "the run should copy and mutate members"
    other = train(cfg.model_copy(update={"seed": cfg.seed + 1}), run_dir=tmp_path / "c",
                  show_progress=False, local=True)
    assert repeatable(other)["members"] != repeatable(first)["members"]


@pytest.mark.slow
def test_distmarl_train_with_the_local_flag_starts_no_ray(tmp_path: Path) -> None:
    """The CLI's ``--local`` in a real subprocess, its output to a file: it trains, writes
    plain progress lines (no bar off a terminal) ending at 100%, and neither starts Ray nor
    writes Ray's files in the home directory (``--local`` runs tracked in MLflow:
    ``test_signals.py``)."""
    home = tmp_path / "home"
    home.mkdir()
    summary = tmp_path / "summary.json"
    with (tmp_path / "train.log").open("w") as log:
        out = subprocess.run(
            [sys.executable, "-m", "distmarl", "train", str(ROOT / "examples/configs/tiny.yaml"),
             "--local", "--no-mlflow", "--summary-json", str(summary),
             "--set", f"tracking.directory={tmp_path / 'runs'}",
             "--set", "training.max_steps_per_member=200", "--set", "evolution.final_episodes=2"],
            stdout=log, stderr=subprocess.STDOUT, timeout=300, cwd=tmp_path,
            env={"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    text = (tmp_path / "train.log").read_text()
    assert out.returncode == 0, text[-2000:]
    result = json.loads(summary.read_text())
    assert result["stop_reason"] == "max_steps" and result["ray"] is None
    assert not (home / ".ray").exists()
    progress = [line for line in text.splitlines() if line.startswith("progress:")]
    assert "\r" not in text and progress
    assert progress[-1].startswith("progress: 100%  400 env steps of 400")
    each = {m["env_steps"] for m in result["members"]}  # whole chunks: 200 or a few more
    assert len(each) == 1 and 200 <= min(each) < 216
    assert (f"distmarl: max_steps after {result['env_steps']:,} env steps (2 members, "
            f"{min(each)} each) in ") in text
    assert "distmarl: time: learners busy " in text  # where the time went, and what held it
    assert any(line.startswith("distmarl: ") and (" waited " in line or "hold the run" in line)
               for line in text.splitlines())


@pytest.mark.slow
def test_a_league_evolves_asynchronously_within_its_sides(tmp_path: Path) -> None:
    """Population-based training in a league: each member evolves at its own boundary, rated
    by its games, copying only members of its own side."""
    cfg = shortened(ROOT / "examples" / "configs" / "simple_tag_maddpg_league.yaml", tmp_path,
                    "evolution.mode=async", "evolution.bottom_frac=0.5",
                    "evolution.top_frac=0.5", "training.max_steps_per_member=480")
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    sides = summary["league"]["member_sides"]
    assert summary["stop_reason"] == "max_steps" and summary["generations"] >= 3
    assert summary["copies"], "some member should have copied a better one"
    assert all(sides[c["member"]] == sides[c["source"]] for c in summary["copies"])
    assert summary["league"]["rated_games"] > 0 and summary["final_games"]


def test_local_with_ray_options_is_refused_naming_them(tmp_path: Path) -> None:
    """``--local`` has no Ray to join or size: asking for one is an error, before anything
    starts."""
    from distmarl.config import ConfigError

    cfg = shortened(ROOT / "examples" / "configs" / "tiny.yaml", tmp_path)
    with pytest.raises(ConfigError, match="--local runs the population in this process"):
        train(cfg, local=True, address="127.0.0.1:6379", show_progress=False)
    with pytest.raises(ConfigError, match="--no-dashboard do not apply"):
        train(cfg, local=True, dashboard=False, show_progress=False)
    assert not list(tmp_path.iterdir())  # no run directory was made


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "spread_mappo"])
def test_members_sharing_a_learner_learn_stacked_as_they_would_apart(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All members on one learner (``population.members_per_learner``): their updates run
    in one stack (apart: each in its own), and the run makes the same calls, updates and (to float rounding) scores as with
    a learner each."""
    from distmarl.algorithms.groups import learn as group_learn

    stacked: list[int] = []

    def counting(inner: Any) -> Any:
        def counted(self: Any, *args: Any) -> Any:
            stacked.append(len(self.members))
            return inner(self, *args)
        return counted

    for cls, method in ((group_learn.OffPolicyStack, "learn_batches"),
                        (group_learn.OnPolicyStack, "learn")):
        monkeypatch.setattr(cls, method, counting(getattr(cls, method)))
    cfg = shortened(ROOT / "examples" / "configs" / f"{name}.yaml", tmp_path,
                    "population.members_per_learner=1")
    apart = train(cfg, run_dir=tmp_path / "apart", show_progress=False, local=True)
    assert set(stacked) <= {1}  # a member alone learns as a stack of one
    together = train(shortened(ROOT / "examples" / "configs" / f"{name}.yaml", tmp_path,
                               f"population.members_per_learner={cfg.num_members}"),
                     run_dir=tmp_path / "together", show_progress=False, local=True)
    assert stacked and max(stacked) == cfg.num_members
    for a, b in zip(apart["members"], together["members"], strict=True):
        assert (a["updates"], a["env_steps"]) == (b["updates"], b["env_steps"])
        assert b["fitness"] == pytest.approx(a["fitness"], rel=1e-4, abs=1e-4)
    assert together["final_score"] == pytest.approx(apart["final_score"], rel=1e-4)


@pytest.mark.slow
def test_a_run_with_compiled_steps_says_what_compiling_cost(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """``resources.learner_step: compiled``: the learners' steps run through torch.compile
    (here its tracing alone, which runs the traced graphs eagerly: the same path, no code
    generation), and the summary gives the steps and the time spent compiling them."""
    from distmarl.algorithms.common import capture

    monkeypatch.setattr(capture, "COMPILE_BACKEND", "eager")
    cfg = shortened(ROOT / "examples" / "configs" / "tiny.yaml", tmp_path,
                    "resources.learner_step=compiled", "population.members_per_learner=1")
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert_trained(cfg, summary)
    assert summary["learner_steps"] == ["compiled"] * cfg.num_members
    assert summary["compile_seconds"] > 0 and summary["step_fallbacks"] == []
    assert sum(m["compile_seconds"] for m in summary["members"]) == summary["compile_seconds"]
