"""Running a stack's update step eagerly or as a captured CUDA graph.

A stacked update of small networks launches hundreds of small kernels one by one from Python,
so on a GPU it waits on the host rather than on arithmetic. Captured once as a CUDA graph, the
whole step (losses, gradients, clipping, Adam, targets) is replayed with one launch.

A step that can be captured reads only tensors: its inputs (the stacked batch, the members'
hyperparameters, their random draws, which are drawn beforehand from each member's own
generator) and the stacked state it updates in place; it makes no decision on the host. The
runners here take such a step as ``step(state, inputs) -> outputs``, trees (dicts) of tensors:

* :class:`EagerStep` calls it (any device);
* :class:`GraphStep` (CUDA) runs its first call eagerly on a side stream, which also warms up
  the kernels and workspaces, then captures it over fixed copies of the inputs; each later
  call copies its inputs into those buffers and replays the graph. The state must keep its
  storage between calls (updated in place), and the inputs their shapes (a change of shapes
  captures again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from distmarl import tree

Tree = Any
Step = Callable[[Tree, Tree], Tree]


class StepRunner(Protocol):
    def __call__(self, state: Tree, inputs: Tree) -> Tree: ...


class EagerStep:
    """The step called as it is; its outputs are its own (no buffers are reused)."""

    def __init__(self, step: Step) -> None:
        self.step = step

    def __call__(self, state: Tree, inputs: Tree) -> Tree:
        return self.step(state, inputs)


class GraphStep:
    """The step captured as a CUDA graph on its first call and replayed after; outputs are
    copies, since the graph overwrites its own on every replay."""

    def __init__(self, step: Step, device: torch.device) -> None:
        if device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, not {device}")
        self.step = step
        self.graph: torch.cuda.CUDAGraph | None = None
        self.shapes: Tree = None
        self.static: Tree = None
        self.out: Tree = None

    def __call__(self, state: Tree, inputs: Tree) -> Tree:
        shapes = _tensors(lambda t: (t.shape, t.dtype), inputs)
        if self.graph is None or shapes != self.shapes:
            return self._capture(state, inputs, shapes)
        _copy_into(self.static, inputs)
        self.graph.replay()
        return _tensors(torch.clone, self.out)

    def _capture(self, state: Tree, inputs: Tree, shapes: Tree) -> Tree:
        """This call's step run eagerly on a side stream, then captured over a copy of its
        inputs (the capture runs nothing: the first replay is the next call's)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.step(state, inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.static = _tensors(torch.clone, inputs)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.step(state, self.static)
        self.shapes = shapes
        return out


def _tensors(fn: Callable[[torch.Tensor], Any], t: Tree) -> Tree:
    """``fn`` of every tensor leaf of ``t`` (other leaves as they are)."""
    return tree.map(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, t)


def _copy_into(into: Tree, source: Tree) -> None:
    """Every tensor leaf of ``source`` copied into the same leaf of ``into`` (the same
    structure: the caller compared their shapes)."""
    tree.map(lambda a, b: a.copy_(b) if isinstance(a, torch.Tensor) else None, into, source)
