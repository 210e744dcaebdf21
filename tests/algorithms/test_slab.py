"""Published weights leave the learner in one copy per dtype (:func:`host_arrays`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from distmarl.algorithms.common.slab import host_arrays
from tests.algorithms.helpers import make


class _Names(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.names.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def test_many_tensors_leave_in_one_copy_per_dtype_as_arrays_of_their_own() -> None:
    tensors = {f"w{i}": torch.randn(3, i + 1) for i in range(12)}
    tensors["steps"] = torch.arange(4)
    tensors["b"] = torch.randn(5)
    with _Names() as seen:
        arrays = host_arrays(tensors)
    copies = [n for n in seen.names if n in ("cat", "clone", "_to_copy", "copy_", "contiguous")]
    assert copies == ["cat"]  # the float slab; the lone int64 tensor is copied by numpy
    assert list(arrays) == list(tensors)
    for name, t in tensors.items():
        assert arrays[name].shape == tuple(t.shape) and arrays[name].dtype == t.numpy().dtype
        np.testing.assert_array_equal(arrays[name], t.numpy())
    before = arrays["w3"].copy()
    tensors["w3"].add_(1.0)  # the arrays own their data
    tensors["steps"].add_(1)
    np.testing.assert_array_equal(arrays["w3"], before)
    np.testing.assert_array_equal(arrays["steps"], np.arange(4))


def test_published_weights_load_into_a_policy_that_acts_as_the_learner() -> None:
    from tests.algorithms.helpers import observations

    learner = make("MADDPG", "mixed", seed=3)
    policy = make("MADDPG", "mixed", seed=4)
    policy.set_weights(learner.get_weights())
    obs = observations(4)
    for a, x in learner.act(obs, explore=False).items():
        np.testing.assert_array_equal(x, policy.act(obs, explore=False)[a])
