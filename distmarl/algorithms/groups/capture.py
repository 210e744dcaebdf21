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

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch

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
        shapes = tree_map(lambda t: (t.shape, t.dtype), inputs)
        if self.graph is None or shapes != self.shapes:
            return self._capture(state, inputs, shapes)
        tree_copy_(self.static, inputs)
        self.graph.replay()
        return tree_map(torch.clone, self.out)

    def _capture(self, state: Tree, inputs: Tree, shapes: Tree) -> Tree:
        """This call's step run eagerly on a side stream, then captured over a copy of its
        inputs (the capture runs nothing: the first replay is the next call's)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.step(state, inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.static = tree_map(torch.clone, inputs)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.step(state, self.static)
        self.shapes = shapes
        return out


def tree_map(fn: Callable[[torch.Tensor], Any], tree: Tree) -> Tree:
    """``fn`` of every tensor leaf of a tree of dicts (other leaves as they are)."""
    if isinstance(tree, Mapping):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree) if isinstance(tree, torch.Tensor) else tree


def tree_copy_(into: Tree, source: Tree) -> None:
    """Copy every tensor leaf of ``source`` into the same leaf of ``into`` (same keys)."""
    if isinstance(into, Mapping):
        if into.keys() != source.keys():
            raise ValueError(f"inputs {sorted(source)} do not match the captured "
                             f"{sorted(into)}")
        for k, v in into.items():
            tree_copy_(v, source[k])
    elif isinstance(into, torch.Tensor):
        into.copy_(source)
