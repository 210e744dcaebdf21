"""A stack's step compiled with ``torch.compile`` gives each member its own updates, builds
once per stack and padded batch size, and falls back to eager, with one warning, when the
compilation fails (:mod:`distmarl.algorithms.common.capture`)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from distmarl.algorithms.common import capture
from distmarl.algorithms.common.capture import StepSettings, resolve_step
from distmarl.algorithms.groups import OffPolicyStack
from distmarl.algorithms.offpolicy.prepare import bucket
from tests.algorithms.helpers import (
    ACTION_SETS,
    Given,
    Recorded,
    batch,
    learns_with,
    make,
    params,
)
from tests.algorithms.test_groups import worst


def _failing_backend(gm: Any, example_inputs: Any) -> Any:
    raise RuntimeError("no compiler for this")


def _learn_alike(mode: str, sizes: list[list[int]]) -> tuple[OffPolicyStack, float]:
    """Two MADDPG members with Gumbel draws learning calls of batches of ``sizes[call][k]``
    rows in a stack run in ``mode``, and their clones each alone (eager): the stack and the
    largest difference of any metric or parameter."""
    members = [make("MADDPG", "discrete", seed=k, lr_actor=1e-3 * (k + 1)) for k in range(2)]
    drawn = Recorded()
    own = [learns_with(m.clone(), Given(drawn.drawn, member=k)) for k, m in enumerate(members)]
    settings = StepSettings()
    for m in members:
        m.step = settings
    stack = OffPolicyStack(members, mode=mode, draws=drawn)  # type: ignore[arg-type]
    gap = 0.0
    for call, call_sizes in enumerate(sizes):
        batches = [[batch(ACTION_SETS["discrete"], size=n, seed=100 * call + 10 * k + u)
                    for u in range(2)] for k, n in enumerate(call_sizes)]
        results = stack.learn_batches(batches)
        for k, m in enumerate(own):
            metrics, _ = m.learn_batches(batches[k])
            gap = max([gap] + [abs(x[n] - y[n]) for x, y in zip(results[k][0], metrics,
                                                                 strict=True) for n in y])
    return stack, max([gap] + [worst(params(s), params(m)) for s, m in zip(members, own,
                                                                           strict=True)])


def test_batches_pad_to_a_few_sizes() -> None:
    assert [bucket(n) for n in (1, 8, 9, 12, 13, 17, 25, 33, 256, 257, 385, 1000)] == \
        [8, 8, 12, 12, 16, 24, 32, 48, 256, 384, 512, 1024]
    assert len({bucket(n) for n in range(8, 1025)}) == 15
    assert all(n <= bucket(n) < 1.5 * n for n in range(8, 1025))


def test_auto_is_eager_on_cpu_and_a_graph_on_cuda() -> None:
    assert resolve_step("auto", "cpu") == "eager"
    assert resolve_step("auto", "cuda") == "graph"
    assert resolve_step("compiled", "cpu") == "compiled"
    with pytest.raises(ValueError, match=r"resources\.learner_step='jit': one of auto, eager"):
        resolve_step("jit", "cpu")


def test_a_compiled_step_is_each_members_own_and_builds_once_per_padded_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 20 and 21 rows pad to 24 (one build), then 23 and 17 to 24 (none), then 30
    to 32 (a second); each member ends as its own eager updates leave it."""
    monkeypatch.setattr(capture, "COMPILE_BACKEND", "eager")  # dynamo's tracing, no codegen
    torch._dynamo.reset()
    stack, gap = _learn_alike("compiled", [[20, 21], [23, 17], [30, 30]])
    assert gap < 1e-5
    log = stack.ref.step.log
    assert log.builds == 2 and log.fallbacks == []
    seconds, fallbacks = log.take()
    assert seconds == log.seconds > 0 and fallbacks == ()
    assert log.take() == (0.0, ())


def test_a_failed_compilation_warns_once_naming_the_stack_and_runs_eagerly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "COMPILE_BACKEND", _failing_backend)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stack, gap = _learn_alike("compiled", [[20, 20], [20, 20], [40, 40]])
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1, said
    assert said[0].startswith("compilation of the step of the MADDPG stack of 2 members on "
                              "cpu failed (")
    assert "no compiler for this" in said[0] and said[0].endswith("it runs eagerly from now on")
    assert stack.ref.step.log.fallbacks == said and stack.ref.step.log.builds == 0
    assert gap < 1e-5
