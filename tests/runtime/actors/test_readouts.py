"""A learner group's read: every member's batches from one buffer call, as views of one set of
tensors, one update's batches of every member adjacent; a stack joins them without a copy."""

from __future__ import annotations

import numpy as np
import torch

from distmarl.algorithms.offpolicy.prepare import joined
from distmarl.runtime.actors.buffer import BufferShell
from distmarl.runtime.actors.learner import replay_readouts
from distmarl.types import ReadSpec, SampleRequest, TransitionChunk
from tests.fakes import AGENTS, FIELDS, check_aligned, rows


def test_one_updates_batches_of_every_member_join_as_one_view() -> None:
    shell = BufferShell({"memory_size": 500, "field_names": FIELDS, "agent_ids": AGENTS,
                         "prioritized": {"alpha": 0.6, "beta": 0.4, "eps": 1e-6}, "seed": 0})
    shell.add(TransitionChunk(rows(np.arange(300))))
    spec = ReadSpec.from_ratio(None, 0.6, 0.4)
    requests = [SampleRequest(f"learner-{k}", 16, 3, spec) for k in range(3)]
    reads = replay_readouts(shell.sample_joined(requests), tuple(FIELDS), "cpu")
    assert [len(r.data) for r in reads] == [3, 3, 3]
    first_field = FIELDS[0]
    for u in range(3):
        parts = [r.data[u] for r in reads]
        one = joined(parts)
        for agent in AGENTS:
            x = one[first_field][agent]
            assert x.shape[0] == 48
            # a view of the call's tensor: no copy
            assert x.untyped_storage().data_ptr() == \
                parts[0][first_field][agent].untyped_storage().data_ptr()
            assert torch.equal(x, torch.cat([p[first_field][agent] for p in parts]))
        weights = joined([r.weights[u] for r in reads])
        assert weights.shape == (48,)
    for r in reads:  # each member's rows' indices, batch after batch, for its priorities
        ids = [check_aligned(tuple({a: b[f][a].numpy() for a in AGENTS} for f in FIELDS))
               for b in r.data]
        np.testing.assert_array_equal(np.concatenate(ids), r.indices)


def test_batches_that_are_not_adjacent_are_copied_together() -> None:
    base = torch.arange(12.0).reshape(6, 2)
    apart = joined([base[0:2], base[4:6]])
    assert torch.equal(apart, torch.cat([base[0:2], base[4:6]]))
    assert apart.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    together = joined([base[0:2], base[2:5]])
    assert torch.equal(together, base[0:5])
    assert together.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
