"""The reference trainers: the off-policy one owes updates by the run's rule (one per
``learn_step`` new transitions past ``learning_delay`` once ``learning_starts`` rows are
stored: a run of the same settings does as many updates), the on-policy one learns once per
fragment, each refuses the other family by name, and distmarl.reference imports no Ray or
MLflow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.collect import Collector
from distmarl.config import load_config
from distmarl.config.replay import UpdateRule
from distmarl.factory import buffer_kwargs, env_spaces, make_algorithm, make_venv, rollout_spec
from distmarl.reference import ReferenceResult, train_off_policy, train_on_policy, train_reference
from distmarl.reference.offpolicy import learn
from distmarl.runtime.driver.trainer import train

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
SPREAD = ROOT / "examples" / "configs" / "spread_mappo.yaml"


def test_off_policy_updates_follow_learn_step_after_learning_starts() -> None:
    # 2 sub-envs, learn_step 8, learning_starts 64; uniform 1-step rows
    cfg = load_config(TINY, ["replay.prioritized_replay=false", "replay.n_step=1"])
    result = train_off_policy(cfg, steps=200, seed=3, eval_every=100, log=False)
    assert isinstance(result, ReferenceResult)
    assert result.env_steps == 200
    # owed from the step whose buffer reaches 64 rows: (200 - 62) / 8 = 17.25 -> 17 updates
    assert result.updates == 17
    assert [s for s, _ in result.history] == [100, 200]
    assert all(np.isfinite(score) for _, score in result.history)
    assert result.last_metrics and all(np.isfinite(v) for v in result.last_metrics.values())
    assert result.env_steps_per_s > 0 and 0 < result.learn_seconds < result.wall_seconds
    spaces = result.algo.observation_spaces
    actions = result.algo.act({a: np.zeros((1, *s.shape), np.float32) for a, s in spaces.items()},
                              explore=False)
    assert {a: x.shape for a, x in actions.items()} == {"speaker_0": (1, 3), "listener_0": (1, 5)}


def test_update_rule_counts_only_steps_past_learning_delay() -> None:
    rule = UpdateRule(learning_starts=16, learning_delay=100)
    assert rule.counted(env_steps=104, new_steps=8, buffer_rows=104) == 4
    assert rule.counted(env_steps=96, new_steps=8, buffer_rows=96) == 0
    assert rule.counted(env_steps=112, new_steps=8, buffer_rows=112) == 8
    assert rule.counted(env_steps=112, new_steps=8, buffer_rows=15) == 0
    assert not rule.may_learn(15) and rule.may_learn(16)


def test_off_policy_updates_equal_a_runs_with_a_learning_delay(tmp_path: Path) -> None:
    """One member of the reference trainer and each member of a run (in process) of the same
    settings do the same number of updates: 8 sub-envs, learn_step 4, learning_delay 100 (the
    buffer holds learning_starts rows long before), 256 env steps per member."""
    cfg = load_config(TINY, ["env.num_envs=8", "algorithm.hp.learn_step=4",
                             "replay.learning_starts=16", "replay.learning_delay=100",
                             "training.max_steps_per_member=256", "evolution.evo_steps=256",
                             "evolution.final_episodes=1", f"tracking.directory={tmp_path}",
                             "tracking.mlflow=false"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    result = train_off_policy(cfg, steps=256, seed=3, log=False)
    # (256 - 100) / 4 = 39: the vectorised step from 96 to 104 earns its 4 steps past 100
    assert result.env_steps == 256 and result.updates == 39
    assert [(m["env_steps"], m["updates"]) for m in summary["members"]] == [(256, 39)] * 2


def test_off_policy_default_replay_is_prioritised_3_step_rows_and_updates_priorities() -> None:
    cfg = load_config(TINY)
    assert (cfg.replay.n_step, cfg.replay.prioritized_replay) == (3, True)
    # a 3-step row is stored 2 vectorised steps late: the buffer holds 64 rows 4 env steps
    # later than with 1-step rows, (200 - 66) / 8 = 16.75 -> 16 updates
    assert train_off_policy(cfg, steps=200, seed=3, log=False).updates == 16
    spaces = env_spaces(cfg.env)
    algo = make_algorithm(cfg.algorithm, spaces, seed=0)
    spec = rollout_spec(cfg, spaces)
    buffer = MultiAgentReplayBuffer(**{**buffer_kwargs(cfg, list(spaces[0]), spec), "seed": 0})
    collector = Collector(make_venv(cfg.env, seed=0), algo, seed=0, spec=spec)
    for _ in range(40):
        buffer.add(collector.collect(1).data)
    batch = buffer.read(32)
    assert batch is not None and batch.weights is not None
    column = "__priority__/default"  # every stored row's priority, oldest (index 0) first
    before = buffer.state_dict()["columns"][column].copy()
    metrics = learn(algo, buffer, batch)
    after = buffer.state_dict()["columns"][column]
    assert all(np.isfinite(v) for v in metrics.values())
    moved = np.flatnonzero(after != before)  # the batch's rows took their TD errors
    assert len(moved) > 0 and set(moved.tolist()) <= set(batch.indices.tolist())


def test_on_policy_learns_once_per_fragment() -> None:
    cfg = load_config(SPREAD, ["algorithm.name=IPPO", "env.num_envs=2",
                               "algorithm.hp.learn_step=16", "algorithm.hp.batch_size=32"])
    result = train_reference(cfg, steps=64, seed=1, log=False)  # picks the on-policy trainer
    assert (result.env_steps, result.updates) == (64, 2)  # fragments of 16 steps * 2 sub-envs
    assert result.history == [] and "approx_kl" in result.last_metrics


def test_each_trainer_refuses_the_other_family_by_name() -> None:
    with pytest.raises(ValueError, match=r"MAPPO is on-policy; train it with distmarl\.reference"):
        train_off_policy(load_config(SPREAD), steps=1)
    with pytest.raises(ValueError, match=r"MADDPG is off-policy; train it with distmarl\.reference"):
        train_on_policy(load_config(TINY), steps=1)


def test_distmarl_reference_imports_neither_ray_nor_mlflow() -> None:
    code = ("import sys, distmarl.reference; "
            "assert not {'ray', 'mlflow'} & set(sys.modules), 'imported'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_off_policy_n_step_rows_reach_the_buffer_and_learn() -> None:
    cfg = load_config(TINY, ["replay.n_step=3"])
    result = train_off_policy(cfg, steps=200, seed=3, log=False)
    # rows leave two steps (4 rows) behind their env steps: 64 rows are stored at step 68,
    # so (200 - 66) / 8 = 16.75 -> 16 updates, one fewer than one-step rows get
    assert result.updates == 16
    assert result.last_metrics and all(np.isfinite(v) for v in result.last_metrics.values())
