"""Runs over replay shards, in process: off-policy members replaying (prioritised, mixed in,
n-step rows) with each shard checkpointed, read by ``buffer-info`` and resumed; on-policy
members reading their fragments shard by shard; shard counts that do not fit refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from tests.tracking.test_mlflow_run import no_process_tracking_uri  # noqa: F401  (autouse)

pytestmark = [pytest.mark.slow]

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
SHARDED = ["tracking.mlflow=false", "buffer.shards=2", "replay.prioritized_replay=true",
           "replay.replay_ratio=0.5", "replay.n_step=3", "evolution.evo_steps=100"]


def test_a_sharded_run_learns_checkpoints_each_shard_and_resumes(tmp_path: Path, capsys) -> None:
    from distmarl.checkpoint import load_checkpoint
    from distmarl.cli import main
    from distmarl.runtime.driver.trainer import train

    sets = [f"tracking.directory={tmp_path}", *SHARDED]
    first = train(load_config(TINY, [*sets, "training.max_steps_per_member=200"]),
                  run_dir=tmp_path / "run", show_progress=False, local=True)
    assert all(m["updates"] > 0 for m in first["members"])
    ckpt = load_checkpoint(Path(first["checkpoint"]))
    assert ckpt.buffer_state is not None and len(ckpt.buffer_state) == 2
    names = sorted(p.name for p in ckpt.path.glob("buffer*.arrow"))
    assert names == ["buffer-0.arrow", "buffer-1.arrow"]
    counters = [s["meta"]["counter"] for s in ckpt.buffer_state]
    # every env step a row (3-step rows: the last 2 of each sub-env wait for their rewards)
    assert min(counters) > 0 and first["env_steps"] - 16 <= sum(counters) <= first["env_steps"]
    for state in ckpt.buffer_state:  # each shard keeps both learners' priorities
        assert set(state["meta"]["priorities"]) == {"learner-0", "learner-1"}
        assert state["meta"]["config"]["memory_size"] == 5000

    assert main(["buffer-info", str(tmp_path / "run" / "checkpoints")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counter"] == sum(counters) and len(info["shards"]) == 2
    assert info["capacity"] == 10000

    # a resume with another shard count is refused before anything starts, naming the key
    with pytest.raises(ConfigError, match=r"buffer\.shards: the checkpoint's buffer has 2 "
                                          r"shards, the config 1"):
        train(load_config(TINY, [*sets, "buffer.shards=1", "training.max_steps_per_member=400"]),
              resume=tmp_path / "run", show_progress=False, local=True)
    second = train(load_config(TINY, [*sets, "training.max_steps_per_member=400"]),
                   resume=tmp_path / "run", show_progress=False, local=True)
    assert second["resumed_from"] and second["stop_reason"] == "max_steps"
    for before, after in zip(first["members"], second["members"]):
        assert after["updates"] > before["updates"]


def test_on_policy_members_read_their_fragments_from_every_shard(tmp_path: Path) -> None:
    from distmarl.runtime.driver.trainer import train
    from tests.runtime.test_onpolicy import on_policy_config

    summary = train(on_policy_config(tmp_path, "IPPO", "buffer.shards=2",
                                     "population.workers_per_member=2", "tracking.mlflow=false",
                                     "evolution.evo_steps=100",
                                     "training.max_steps_per_member=200"),
                    run_dir=tmp_path / "run", show_progress=False, local=True)
    assert summary["stop_reason"] == "max_steps"
    assert all(m["updates"] > 0 for m in summary["members"])


def test_shards_that_cannot_all_hold_rows_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"buffer\.shards 3 is more than the 2 rollout workers"):
        load_config(TINY, ["buffer.shards=3"])
    with pytest.raises(ConfigError, match=r"buffer\.shards"):
        load_config(TINY, ["buffer.shards=0"])
    assert load_config(TINY, ["buffer.shards=auto"]).buffer.shards == "auto"
