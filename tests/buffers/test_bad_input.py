"""Every bad save raises a ValueError naming agent, field and shapes; nothing stored changes.

One case per row: add a row to grow the list.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from distmarl.buffers import MultiAgentReplayBuffer
from tests.fakes import AGENTS, FIELDS, rows, step_args


def _without_agent(chunk, field, agent):
    chunk[field].pop(agent)
    return chunk


def _extra_agent(chunk, field):
    chunk[field]["ghost_0"] = chunk[field]["speaker_0"]
    return chunk


def _reshaped(chunk, field, agent, shape):
    chunk[field][agent] = np.zeros(shape, dtype=np.float32)
    return chunk


def _retyped(chunk, field, agent, dtype):
    chunk[field][agent] = chunk[field][agent].astype(dtype)
    return chunk


def _short(chunk, field, agent):
    chunk[field][agent] = chunk[field][agent][:3]
    return chunk


# (case id, how to spoil a good 8-row chunk, words the error must contain)
BAD_CHUNKS: list[tuple[str, Callable, list[str]]] = [
    ("missing agent", lambda c: _without_agent(c, "obs", "listener_0"), ["obs", "missing ['listener_0']"]),
    ("unknown agent", lambda c: _extra_agent(c, "reward"), ["reward", "unknown ['ghost_0']"]),
    ("obs shape", lambda c: _reshaped(c, "obs", "listener_0", (8, 12)), ["listener_0", "obs", "(8, 12)", "('num_envs', 11)"]),
    ("action rank", lambda c: _reshaped(c, "action", "speaker_0", (8, 3, 1)), ["speaker_0", "action", "(8, 3, 1)"]),
    ("float into bool", lambda c: _retyped(c, "done", "speaker_0", np.float32), ["speaker_0", "done", "float32", "bool"]),
    ("num_envs disagree", lambda c: _short(c, "next_obs", "listener_0"), ["num_envs", "listener_0", "next_obs", "(3, 11)", "(8, 3)"]),
]


def filled() -> MultiAgentReplayBuffer:
    buf = MultiAgentReplayBuffer(20, FIELDS, AGENTS, seed=0, replay_ratio=0.5)
    buf.add(rows(np.arange(18)))  # next write would wrap: a partial write would show
    buf.read(4, "c")
    return buf


def snapshot(buf: MultiAgentReplayBuffer) -> dict:
    state = buf.state_dict()
    return {"meta": repr(state["meta"]), **state["columns"]}


@pytest.mark.parametrize("case,spoil,words", BAD_CHUNKS, ids=[c[0] for c in BAD_CHUNKS])
def test_bad_chunk_is_refused_and_nothing_changes(case, spoil, words) -> None:
    buf = filled()
    before = snapshot(buf)
    bad = spoil(rows(np.arange(100, 108)))
    with pytest.raises(ValueError) as err:
        buf.add(bad)
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    with pytest.raises(ValueError):  # the positional API refuses it the same way
        buf.save_to_memory(*(bad[f] for f in FIELDS), is_vectorised=True)
    after = snapshot(buf)
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)


def test_missing_field_is_named() -> None:
    buf = filled()
    chunk = rows(np.arange(8))
    chunk.pop("reward")
    with pytest.raises(ValueError, match=r"missing \['reward'\]"):
        buf.add(chunk)
    with pytest.raises(ValueError, match="expected 5 fields"):
        buf.save_to_memory(*step_args(np.arange(8))[:4], is_vectorised=True)
    assert buf.counter == 18


def test_single_env_shape_mismatch_names_agent_and_field() -> None:
    buf = MultiAgentReplayBuffer(10, ["obs"], ["a"], seed=0)
    buf.save_to_memory({"a": np.zeros(4)})
    with pytest.raises(ValueError, match=r"agent 'a' field 'obs': shape \(5,\) does not match \(4,\)"):
        buf.save_to_memory({"a": np.zeros(5)})
    assert buf.counter == 1


def test_changed_dict_observation_keys_are_refused() -> None:
    buf = MultiAgentReplayBuffer(10, ["obs"], ["a"], seed=0)
    buf.save_to_memory({"a": {"x": np.zeros(2), "y": np.zeros(1)}})
    with pytest.raises(ValueError, match="agent 'a' field 'obs'"):
        buf.save_to_memory({"a": {"x": np.zeros(2)}})
    with pytest.raises(ValueError, match="structure"):
        buf.save_to_memory({"a": {"x": np.zeros(2), "y": np.zeros(1), "z": np.zeros(1)}})
    assert buf.counter == 1


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"memory_size": 0}, "memory_size"),
        ({"replay_ratio": 1.0}, "replay_ratio"),
        ({"replay_ratio": -0.1}, "replay_ratio"),
        ({"learning_starts": -1}, "learning_starts"),
        ({"agent_ids": []}, "agent_ids"),
        ({"field_names": ["obs", "obs"]}, "field_names"),
        ({"agent_ids": ["a/b"]}, "'a/b'"),
        ({"samples_per_insert": 0}, "samples_per_insert"),
    ],
)
def test_bad_buffer_config(kwargs, words) -> None:
    args = {"memory_size": 10, "field_names": FIELDS, "agent_ids": AGENTS, **kwargs}
    with pytest.raises(ValueError, match=words):
        MultiAgentReplayBuffer(**args)


def test_bad_batch_size() -> None:
    buf = filled()
    with pytest.raises(ValueError, match="batch_size"):
        buf.read(0)
