"""Checkpoints: atomic, checksummed, pruned, loaded as data; corruption names the file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from tests.fakes import AGENTS, FIELDS, rows


def member_state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"actor": {"w": torch.randn(4, 3, generator=g)}, "hp": {"lr": 1e-3, "batch_size": 64},
            "steps": seed}


def make(tmp_path, step: int = 100, keep_last: int = 3):
    buf = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=0)
    buf.add(rows(np.arange(30)), member=1)
    meta = {"generation": 2, "env_steps": [step, step], "rng": {"state": 123}}
    path = save_checkpoint(tmp_path / "checkpoints", step, meta, [member_state(0), member_state(1)],
                           [buf.state_dict()], keep_last=keep_last)
    return path, buf


def test_round_trip(tmp_path) -> None:
    path, buf = make(tmp_path)
    ckpt = load_checkpoint(path)
    assert ckpt.step == 100 and ckpt.meta["generation"] == 2
    assert torch.equal(ckpt.members[1]["actor"]["w"], member_state(1)["actor"]["w"])
    assert ckpt.members[0]["hp"] == {"lr": 1e-3, "batch_size": 64}
    restored = MultiAgentReplayBuffer(50, FIELDS, AGENTS)
    assert ckpt.buffer_state is not None and len(ckpt.buffer_state) == 1
    restored.load_state_dict(ckpt.buffer_state[0])
    np.testing.assert_array_equal(restored.state_dict()["columns"]["listener_0/obs"],
                                  buf.state_dict()["columns"]["listener_0/obs"])
    assert load_checkpoint(tmp_path / "checkpoints").path == path  # the root: the latest
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp")]


def test_keep_last(tmp_path) -> None:
    for step in (10, 20, 30, 40, 50):
        make(tmp_path, step, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == [
        "step-000000000040", "step-000000000050"]


@pytest.mark.parametrize("target", ["member-1.pt", "buffer.arrow", "meta.json"])
def test_corrupted_file_is_named(tmp_path, target) -> None:
    path, _ = make(tmp_path)
    data = bytearray((path / target).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / target).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"checksum mismatch in checkpoint file .*{target}"):
        load_checkpoint(path)


def test_truncated_and_missing_files(tmp_path) -> None:
    path, _ = make(tmp_path)
    data = (path / "member-0.pt").read_bytes()
    (path / "member-0.pt").write_bytes(data[:-10])
    with pytest.raises(CheckpointError, match=r"member-0.pt is truncated or changed"):
        load_checkpoint(path)
    (path / "member-0.pt").unlink()
    with pytest.raises(CheckpointError, match=r"member-0\.pt is missing"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"manifest .* is corrupted"):
        load_checkpoint(path)


def test_pickled_code_is_refused(tmp_path) -> None:
    """A member file holding a pickled object (code) is refused by weights_only loading."""
    path, _ = make(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("owned",))

    torch.save({"x": Evil()}, path / "member-0.pt")
    import json

    from distmarl.checkpoint import _sha256
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["member-0.pt"] = {"sha256": _sha256(path / "member-0.pt"),
                                        "bytes": (path / "member-0.pt").stat().st_size}
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(Exception, match=r"(?i)weights_only|unsupported|global"):
        load_checkpoint(path)


def test_league_snapshots_round_trip_as_weights_with_their_checksums(tmp_path) -> None:
    from distmarl.algorithms import IPPO
    from distmarl.envs import make_vector_env

    venv = make_vector_env("pettingzoo.classic:tictactoe_v3", 1, mode="sync", seed=0)
    agents = list(venv.possible_agents)
    algo = IPPO({a: venv.single_observation_space(a) for a in agents},
                {a: venv.single_action_space(a) for a in agents},
                None, seed=0)
    venv.close()
    weights = algo.get_weights()
    path = save_checkpoint(tmp_path, 7, {"x": 1}, [], snapshots={"snapshot/3": weights})
    assert (path / "snapshot-3.pt").exists()
    back = load_checkpoint(path).snapshots["snapshot/3"]
    assert back["arch"] == weights["arch"]
    assert all(np.array_equal(back["params"][k], v) for k, v in weights["params"].items())
    clone = IPPO(algo.observation_spaces, algo.action_spaces, algo.net_config, seed=1)
    clone.set_weights(back)  # acts as the snapshot did
    with pytest.raises(ValueError, match="snapshot/<number>, got 'member/0'"):
        save_checkpoint(tmp_path, 8, {}, [], snapshots={"member/0": weights})
    (path / "snapshot-3.pt").write_bytes(b"changed")
    with pytest.raises(CheckpointError, match=r"snapshot-3\.pt is truncated or changed"):
        load_checkpoint(path)
