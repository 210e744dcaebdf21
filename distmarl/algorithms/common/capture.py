"""Running a stack's update step: eagerly, compiled (``torch.compile``) or as a CUDA graph.

A stacked update of small networks launches hundreds of small kernels one by one from Python,
so on a GPU it waits on the host rather than on arithmetic. Captured once as a CUDA graph, the
whole step (losses, gradients, clipping, Adam, targets) is replayed with one launch.

A step that can be compiled or captured reads only tensors: its inputs (the stacked batch, the
members' hyperparameters, their random draws, which are drawn beforehand) and the stacked
state it updates in place; it makes no decision on the host. The runners here take such a step
as ``step(state, inputs) -> outputs``, trees (dicts) of tensors:

* :class:`EagerStep` calls it (any device);
* :class:`CompiledStep` calls it through ``torch.compile`` (one compilation per shape of the
  inputs, which padding batches to a few sizes keeps few);
* :class:`GraphStep` (CUDA) runs its first call of each input shape eagerly on a side stream,
  which also warms up the kernels and workspaces, then captures it over fixed copies of the
  inputs; each later call of that shape copies its inputs into those buffers and replays the
  graph. The state must keep its storage between calls (updated in place).

A compilation or capture that fails does not stop the run: the runner says so once (a
``RuntimeWarning`` naming the stack, kept in its :class:`BuildLog`) and runs that call, and
every later one, eagerly. What compiling and capturing cost is counted in the log
(:class:`StepSettings` carries it from the learner to every stack it builds).

Which runner ``auto`` picks (:func:`resolve_step`) is measured (``benchmarks.micro.learner_step``):
on CPU eager, where the compiled step ran slower and took long to compile; on CUDA a graph,
whose one launch per step replaces hundreds.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from distmarl import tree

Tree = Any
Step = Callable[[Tree, Tree], Tree]
#: how a stack runs its step: ``static`` is the step a graph captures, run eagerly (tests)
Mode = Literal["eager", "static", "compiled", "graph"]
MODES: tuple[Mode, ...] = ("eager", "static", "compiled", "graph")
#: ``resources.learner_step``'s values
SETTINGS = ("auto", "eager", "compiled", "graph")
#: the backend ``compiled`` steps use (torch's default)
COMPILE_BACKEND: Any = "inductor"
#: compilations one step function may keep (stacks and padded batch sizes: torch's default of
#: 8 would leave later stacks uncompiled without a word)
RECOMPILE_LIMIT = 64


def resolve_step(setting: str, device: torch.device | str) -> Mode:
    """The mode ``setting`` (one of :data:`SETTINGS`) runs on ``device``: ``auto`` is eager on
    CPU and a CUDA graph on CUDA (see the module docstring)."""
    if setting not in SETTINGS:
        raise ValueError(f"resources.learner_step={setting!r}: one of {', '.join(SETTINGS)}")
    if setting != "auto":
        return setting  # type: ignore[return-value]
    return "graph" if torch.device(device).type == "cuda" else "eager"


@dataclass
class BuildLog:
    """What compiling or capturing a learner's steps cost: how many ``builds`` (one per stack
    and input shape), their ``seconds`` (each the whole call that built, so it includes one
    step) and, per runner that fell back to eager, why."""

    builds: int = 0
    seconds: float = 0.0
    fallbacks: list[str] = field(default_factory=list)
    _taken: tuple[float, int] = (0.0, 0)

    def built(self, seconds: float) -> None:
        self.builds += 1
        self.seconds += seconds

    def fell_back(self, message: str) -> None:
        """Say once that a runner fell back to eager (a warning, and kept here)."""
        self.fallbacks.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)

    def take(self) -> tuple[float, tuple[str, ...]]:
        """Build seconds and fallbacks since the last call (what a train call reports)."""
        seconds, seen = self._taken
        self._taken = (self.seconds, len(self.fallbacks))
        return self.seconds - seconds, tuple(self.fallbacks[seen:])


@dataclass
class StepSettings:
    """How a learner's stacks run their step (``mode``) and where their builds are counted
    (``log``); every stack built for a member takes its member's."""

    mode: Mode = "eager"
    log: BuildLog = field(default_factory=BuildLog)


class StepRunner(Protocol):
    def __call__(self, state: Tree, inputs: Tree) -> Tree: ...


class EagerStep:
    """The step called as it is; its outputs are its own (no buffers are reused)."""

    def __init__(self, step: Step) -> None:
        self.step = step

    def __call__(self, state: Tree, inputs: Tree) -> Tree:
        return self.step(state, inputs)


class _Building:
    """A runner that builds something per input shape, falling back to ``step`` run eagerly
    when a build fails (see the module docstring). ``name`` names the stack in the warning."""

    KIND = ""

    def __init__(self, step: Step, name: str, log: BuildLog) -> None:
        self.step, self.name, self.log = step, name, log
        self.failed = False
        self.shapes: set[Tree] = set()

    def __call__(self, state: Tree, inputs: Tree) -> Tree:
        if self.failed:
            return self.step(state, inputs)
        shapes = _tensors(lambda t: (tuple(t.shape), t.dtype), inputs)
        key = repr(shapes)
        if key in self.shapes:
            return self._run(state, inputs, key)
        start = time.perf_counter()
        try:
            out = self._build(state, inputs, key)
        except Exception as exc:  # any failure to build runs the step eagerly
            self.failed = True
            self.log.fell_back(f"{self.KIND} of the step of {self.name} failed "
                               f"({_why(exc)}); it runs eagerly from now on")
            return self.step(state, inputs)
        self.log.built(time.perf_counter() - start)
        self.shapes.add(key)
        return out

    def _build(self, state: Tree, inputs: Tree, key: str) -> Tree:
        raise NotImplementedError

    def _run(self, state: Tree, inputs: Tree, key: str) -> Tree:
        raise NotImplementedError


class CompiledStep(_Building):
    """The step through ``torch.compile`` (torch keeps one compilation per input shape). A
    compilation that fails part-way may have run part of the step; the call then runs the
    whole step eagerly (a one-off, at the first call of a shape)."""

    KIND = "compilation"

    def __init__(self, step: Step, name: str, log: BuildLog) -> None:
        super().__init__(step, name, log)
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                   RECOMPILE_LIMIT)
        self.compiled = torch.compile(step, backend=COMPILE_BACKEND, dynamic=False)

    def _build(self, state: Tree, inputs: Tree, key: str) -> Tree:
        with warnings.catch_warnings():  # the networks' cached helpers, which it traces
            warnings.filterwarnings("ignore", message=".*functools.lru_cache")
            return self.compiled(state, inputs)

    def _run(self, state: Tree, inputs: Tree, key: str) -> Tree:
        return self.compiled(state, inputs)


class GraphStep(_Building):
    """The step captured as a CUDA graph per input shape and replayed; outputs are copies,
    since a graph overwrites its own on every replay."""

    KIND = "CUDA graph capture"

    def __init__(self, step: Step, device: torch.device, name: str, log: BuildLog) -> None:
        if device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, not {device}")
        super().__init__(step, name, log)
        #: per input shape: the graph, its input buffers and its outputs
        self.graphs: dict[str, tuple[torch.cuda.CUDAGraph, Tree, Tree]] = {}

    def _run(self, state: Tree, inputs: Tree, key: str) -> Tree:
        graph, static, out = self.graphs[key]
        _copy_into(static, inputs)
        graph.replay()
        return _tensors(torch.clone, out)

    def _build(self, state: Tree, inputs: Tree, key: str) -> Tree:
        """This call's step run eagerly on a side stream, then captured over a copy of its
        inputs (the capture runs nothing: the first replay is the next call's). A failed
        capture leaves this call's result standing: the step ran before it."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.step(state, inputs)
        torch.cuda.current_stream().wait_stream(side)
        try:
            static = _tensors(torch.clone, inputs)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = self.step(state, static)
        except Exception as exc:  # the eager result stands; later calls eager
            self.failed = True
            self.log.fell_back(f"{self.KIND} of the step of {self.name} failed "
                               f"({_why(exc)}); it runs eagerly from now on")
            return out
        self.graphs[key] = (graph, static, captured)
        return out


def runner(mode: Mode, step: Step, static_step: Step, device: torch.device, name: str,
           log: BuildLog) -> StepRunner:
    """The runner of ``mode``: ``step`` (with the host's decisions) eagerly, or
    ``static_step`` (tensors alone) run eagerly (``static``), compiled or captured."""
    if mode == "eager":
        return EagerStep(step)
    if mode == "static":
        return EagerStep(static_step)
    if mode == "compiled":
        return CompiledStep(static_step, name, log)
    return GraphStep(static_step, device, name, log)


def _why(exc: BaseException) -> str:
    """The root of a failure in one line: its innermost cause's type and first line."""
    while True:  # torch's compile errors hold the backend's own as inner_exception
        inner = exc.__cause__ or getattr(exc, "inner_exception", None)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def _tensors(fn: Callable[[torch.Tensor], Any], t: Tree) -> Tree:
    """``fn`` of every tensor leaf of ``t`` (other leaves as they are)."""
    return tree.map(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, t)


def _copy_into(into: Tree, source: Tree) -> None:
    """Every tensor leaf of ``source`` copied into the same leaf of ``into`` (the same
    structure: the caller compared their shapes)."""
    tree.map(lambda a, b: a.copy_(b) if isinstance(a, torch.Tensor) else None, into, source)
