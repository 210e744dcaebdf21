"""Deterministic transition data for tests: every value encodes its row id, so alignment across
fields and agents, loss and duplication can be checked exactly."""

from __future__ import annotations

import numpy as np

AGENTS = ["speaker_0", "listener_0"]
FIELDS = ["obs", "action", "reward", "next_obs", "done"]
OBS_DIM = {"speaker_0": 3, "listener_0": 11}
ACT_DIM = {"speaker_0": 3, "listener_0": 5}


def rows(ids: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """A chunk ``field -> agent -> (len(ids), ...)`` whose values are functions of the row id."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    out: dict[str, dict[str, np.ndarray]] = {f: {} for f in FIELDS}
    for k, agent in enumerate(AGENTS):
        base = ids.astype(np.float32)[:, None]
        out["obs"][agent] = np.repeat(base, OBS_DIM[agent], axis=1) + k
        out["next_obs"][agent] = np.repeat(base, OBS_DIM[agent], axis=1) + k + 0.5
        out["action"][agent] = np.repeat(base, ACT_DIM[agent], axis=1) * 2 + k
        out["reward"][agent] = ids.astype(np.float32) * 3 + k
        out["done"][agent] = (ids % 7 == 0) & (np.arange(n) >= 0)
    return out


def step_args(ids: np.ndarray) -> tuple[dict[str, np.ndarray], ...]:
    """The same chunk as positional ``save_to_memory`` arguments, in FIELDS order."""
    chunk = rows(ids)
    return tuple(chunk[f] for f in FIELDS)


def ids_of(batch_obs_speaker: np.ndarray) -> np.ndarray:
    """Row ids back from a sampled ``obs['speaker_0']`` array ``(batch, 3)``."""
    return np.asarray(batch_obs_speaker)[:, 0].astype(np.int64)


def check_aligned(data: tuple) -> np.ndarray:
    """Assert every field and agent of a sampled batch (FIELDS order) describes the same rows;
    return their ids."""
    obs, action, reward, next_obs, done = data
    ids = ids_of(obs["speaker_0"])
    for k, agent in enumerate(AGENTS):
        np.testing.assert_array_equal(np.asarray(obs[agent])[:, 0], ids + k)
        np.testing.assert_array_equal(np.asarray(next_obs[agent])[:, 0], ids + k + 0.5)
        np.testing.assert_array_equal(np.asarray(action[agent])[:, -1], ids * 2 + k)
        np.testing.assert_array_equal(np.asarray(reward[agent])[:, 0], ids * 3 + k)
        np.testing.assert_array_equal(np.asarray(done[agent])[:, 0].astype(bool), ids % 7 == 0)
    return ids


def tensors(obj, path: str = ""):
    """Every tensor in a nested state (dicts, lists, tuples), as ``(path, tensor)`` pairs."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors(v, f"{path}/{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from tensors(v, f"{path}/{i}")
