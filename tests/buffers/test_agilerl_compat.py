"""AgileRL's ``MultiAgentReplayBuffer`` contract, as AgileRL's own tests check it.

The assertions are ported from AgileRL v2.7.1, ``tests/test_components/
test_multi_agent_replay_buffer.py`` (test names given per test), and from the contract of
``agilerl/components/multi_agent_replay_buffer.py`` (``stack_transitions``;
``_process_transition`` stacks each agent's field with it, casts done-like fields to uint8 and
converts through ``obs_to_tensor``, which makes every leaf a float32 tensor). Tests of AgileRL's
private storage (``memory`` deque, ``experience`` namedtuple, ``_add``) have no counterpart:
distmarl stores preallocated rings.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distmarl.buffers import MultiAgentReplayBuffer

FIELDS3 = ["state", "action", "reward"]
FIELDS5 = ["state", "action", "reward", "next_state", "done"]
AGENTS = ["agent1", "agent2"]
STATE = {"agent1": np.array([1, 2, 3]), "agent2": np.array([1, 2, 3])}
ACTION = {"agent1": np.array([4, 5]), "agent2": np.array([4, 5])}
REWARD = {"agent1": np.array([6]), "agent2": np.array([7])}


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def test_initialize_instance_with_valid_arguments() -> None:
    """AgileRL: ``test_initialize_instance_with_valid_arguments``."""
    buffer = MultiAgentReplayBuffer(100, FIELDS3, AGENTS)
    assert len(buffer) == 0 and buffer.memory_size == 100
    assert buffer.field_names == FIELDS3 and buffer.agent_ids == AGENTS
    assert buffer.counter == 0 and buffer.device is None


def test_get_length_of_memory_and_add_any_experiences() -> None:
    """AgileRL: ``test_get_length_of_memory``, ``test_add_multiple_experiences_to_memory``,
    ``test_add_any_experiences_to_memory`` (rows in insertion order, single after vectorised)."""
    buffer = MultiAgentReplayBuffer(100, FIELDS3, AGENTS, device="cpu")
    for _ in range(3):
        buffer.save_to_memory(STATE, ACTION, REWARD)
    assert len(buffer) == 3
    states = {"agent1": np.array([[1, 2], [3, 4]]), "agent2": np.array([[1, 2], [3, 4]])}
    actions = {"agent1": np.array([[0], [1]]), "agent2": np.array([[0], [1]])}
    other = MultiAgentReplayBuffer(100, FIELDS3, AGENTS, device="cpu")
    other.save_to_memory_vect_envs(states, actions, actions)
    other.save_to_memory({a: np.array([1, 2]) for a in AGENTS}, {a: np.array([0]) for a in AGENTS},
                         {a: np.array([0]) for a in AGENTS}, is_vectorised=False)
    assert len(other) == 3 and other.counter == 3
    values, _ = other.storage.logical_columns()
    np.testing.assert_array_equal(values[0], [[1, 2], [3, 4], [1, 2]])  # agent1 state
    np.testing.assert_array_equal(values[2], [[0], [1], [0]])  # agent1 action


def test_add_and_sample_vect_experiences_to_memory() -> None:
    """AgileRL: ``test_add_and_sample_vect_experiences_to_memory``: every sampled row is the
    same sub-env in every field."""
    buffer = MultiAgentReplayBuffer(100, ["environments", "state"], AGENTS, device="cpu", seed=0)
    num_envs = 50
    environments = {agent: np.array([[env] for env in range(num_envs)]) for agent in AGENTS}
    states = {agent: np.array([[(env + 1) * (a_idx + 1)] for env in range(num_envs)])
              for a_idx, agent in enumerate(AGENTS)}
    buffer.save_to_memory(states, environments, is_vectorised=True)
    sampled_states, sampled_environments = buffer.sample(batch_size=25)
    for agent in sampled_environments:
        for idx, env in enumerate(sampled_environments[agent]):
            assert states[agent][int(env)] == sampled_states[agent][idx].cpu().numpy()


@pytest.mark.parametrize("state", [
    {"agent1": np.array([1, 2, 3]), "agent2": np.array([1, 2, 3])},
    {"agent1": np.random.default_rng(0).random((3, 16, 16)),
     "agent2": np.random.default_rng(1).random((3, 16, 16))},
    {"agent1": {i: np.random.default_rng(i).random((3, 8, 8)) for i in range(3)},
     "agent2": {i: np.random.default_rng(i).random((3, 8, 8)) for i in range(3)}},
], ids=["vector", "image", "dict"])
def test_sample_experiences_from_memory(state) -> None:
    """AgileRL: ``test_sample_experiences_from_memory`` (``_images``, ``_dict``): one field per
    item, ``(batch_size, *shape)``; and every leaf a float32 tensor, as ``obs_to_tensor``
    makes it."""
    buffer = MultiAgentReplayBuffer(100, FIELDS3, AGENTS)
    buffer.save_to_memory(state, ACTION, REWARD)
    batch_size = 1
    transition = buffer.sample(batch_size)
    assert len(transition) == len(FIELDS3)
    if not isinstance(state["agent1"], dict):
        assert transition[0]["agent1"].shape == (batch_size, *state["agent1"].shape)
    else:
        assert transition[0]["agent1"][2].shape == (batch_size, 3, 8, 8)
    assert transition[1]["agent1"].shape == (batch_size, *ACTION["agent1"].shape)
    assert transition[2]["agent1"].shape == (batch_size, *REWARD["agent1"].shape)
    for field in transition:
        for leaf in _leaves(field):
            assert isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float32


def test_every_sampled_field_is_float32_while_read_stays_compact() -> None:
    """AgileRL returns float32 for every field (int64 actions, int8 boards, uint8 frames, bool
    dones); the values are unchanged. ``read`` keeps the stored dtypes."""
    fields = ["obs", "board", "action", "done"]
    buffer = MultiAgentReplayBuffer(10, fields, ["a"], seed=0)
    frames = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    boards = np.array([[[-1, 0], [1, 0]], [[0, 1], [1, -1]]], dtype=np.int8)
    buffer.save_to_memory({"a": frames}, {"a": boards}, {"a": np.array([3, 4], dtype=np.int64)},
                          {"a": np.array([True, False])}, is_vectorised=True)
    obs, board, action, done = buffer.sample(16)
    assert {t["a"].dtype for t in (obs, board, action, done)} == {torch.float32}
    rows = action["a"][:, 0].long() - 3  # the row each sampled item came from
    assert torch.equal(obs["a"], torch.from_numpy(frames)[rows].float())
    assert torch.equal(board["a"], torch.from_numpy(boards)[rows].float())
    assert torch.equal(done["a"][:, 0], (rows == 0).float())
    compact = buffer.read(4).data
    assert [c["a"].dtype for c in compact] == [np.uint8, np.int8, np.int64, np.bool_]


def test_stack_transitions_returns_column_arrays() -> None:
    """AgileRL: ``test_returns_np_transition_dictionary`` (and ``_asingle_experience``,
    ``_images``): each agent's field is stacked with ``stack_transitions``; one-element values
    become ``(n, 1)``, images ``(n, *shape)``, and the values keep their order."""
    stack = MultiAgentReplayBuffer.stack_transitions
    state = stack([np.array([1]), np.array([4])])
    assert isinstance(state, np.ndarray) and state.shape == (2, 1)
    assert np.array_equal(state, np.array([[1], [4]]))
    assert np.array_equal(stack([np.array([True]), np.array([False])]).astype(np.uint8),
                          np.array([[1], [0]]))
    assert stack([np.array([3])]).shape == (1, 1)
    images = stack([np.zeros((3, 16, 16)), np.ones((3, 16, 16))])
    assert images.shape == (2, 3, 16, 16) and images[1].min() == 1
    # numbers, dicts and tuples of numbers / arrays (AgileRL's dict and tuple branches)
    assert stack([0.5, 1.5, 2.5]).shape == (3, 1)
    stacked = stack([{"pos": np.array([1.0, 2.0]), "id": 3}, {"pos": np.array([3.0, 4.0]), "id": 5}])
    assert stacked["pos"].shape == (2, 2) and np.array_equal(stacked["id"], [[3], [5]])
    pair = stack([(np.array([1]), np.zeros((2, 2))), (np.array([2]), np.ones((2, 2)))])
    assert isinstance(pair, tuple) and pair[0].shape == (2, 1) and pair[1].shape == (2, 2, 2)
    with pytest.raises(ValueError, match="at least one transition"):
        stack([])


def test_returns_torch_transition_dictionary() -> None:
    """AgileRL: ``test_returns_torch_transition_dictionary``: stacked fields as tensors equal
    to the stacked integers (``torch.equal`` compares across dtypes), done-like fields 1/0."""
    buffer = MultiAgentReplayBuffer(10, FIELDS5, AGENTS, seed=0)
    experiences = [
        ({"agent1": np.array([1, 2, 3]), "agent2": np.array([4, 5, 6])},
         {"agent1": np.array([0]), "agent2": np.array([1])},
         {"agent1": np.array([0]), "agent2": np.array([1])},
         {"agent1": np.array([3, 2, 1]), "agent2": np.array([6, 5, 4])},
         {"agent1": np.array([True]), "agent2": np.array([False])}),
        ({"agent1": np.array([4, 5, 6]), "agent2": np.array([7, 8, 9])},
         {"agent1": np.array([1]), "agent2": np.array([0])},
         {"agent1": np.array([1]), "agent2": np.array([0])},
         {"agent1": np.array([6, 5, 4]), "agent2": np.array([9, 8, 7])},
         {"agent1": np.array([False]), "agent2": np.array([True])}),
    ]
    for e in experiences:
        buffer.save_to_memory(*e)
    batch = buffer.sample(64)
    order = batch[1]["agent1"][:, 0].long()  # which experience each row is
    assert set(order.tolist()) == {0, 1}
    for f, field in enumerate(FIELDS5):
        for agent in AGENTS:
            expected = torch.from_numpy(MultiAgentReplayBuffer.stack_transitions(
                [e[f][agent] for e in experiences]))[order]
            got = batch[f][agent]
            assert isinstance(got, torch.Tensor) and got.dtype == torch.float32, field
            assert got.shape == (64, *expected.shape[1:]) and torch.equal(got, expected), field
