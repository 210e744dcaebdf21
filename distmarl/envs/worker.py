"""Where sub-envs run: in this process (``SyncBackend``) or in worker processes (``AsyncBackend``).

Both backends hold the same ``Buffers`` layout and run the same ``SubEnvRunner``; they differ only
in where the runner lives. Their interface: ``reset(seeds, options)``, ``step()``, ``close()``,
``pids``, ``num_workers``, ``bufs``.

**Start method.** Worker processes are started with ``"forkserver"`` where the platform has it
(Linux, macOS) and ``"spawn"`` elsewhere, never plain ``"fork"``: rollout workers run inside Ray
actors whose processes carry gRPC / core-worker threads and torch's intra-op thread pool. ``fork``
copies only the calling thread, so a lock held by another thread at that moment stays locked
forever in the child (a classic deadlock). The fork server is a fresh single-threaded process
started once per parent; forking from it is cheap and safe. Env factories are pickled with
cloudpickle (via gymnasium's ``CloudpickleWrapper``), so lambdas and closures work; a script
using async mode needs the usual ``if __name__ == "__main__":`` guard.

**Shared memory.** One ``RawArray`` of bytes (``VectorLayout.nbytes()``) holds every batched
array: per agent the observation leaves, final observations, actions, env-defined actions,
rewards (float64) and flags (bool), each ``(num_envs, ...)`` on its own 64-byte boundary. Worker
``w`` owns the rows of its contiguous slice of sub-envs. Pipes carry only a command and, back,
the non-empty info dicts, so one vector step costs one message pair per worker, not per sub-env.

**Failures and cleanup.** A sub-env exception is sent back with its traceback and raised here
as ``SubEnvError`` naming the sub-env; a worker that dies is detected by polling its pipe and
process sentinel. Either way every worker is shut down before the error propagates. Workers
ignore SIGINT (Ctrl-C is the parent's to handle), exit when their pipe closes (the parent is
gone), are daemonic, and a ``weakref.finalize`` terminates them when the backend is collected
or the interpreter exits without ``close()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from typing import Any, cast

from gymnasium.vector.utils import CloudpickleWrapper

from distmarl.envs.errors import SubEnvError
from distmarl.envs.runner import Info, SubEnvRunner, check_compatible
from distmarl.envs.spaces import Buffers, VectorLayout

EnvFn = Callable[[], Any]
StepResult = list[tuple[int, Info | None, Info | None]]
ResetResult = list[tuple[int, Info]]
_POLL_S = 0.25  # how often a waiting parent checks that its workers are still alive
_JOIN_S = 2.0  # how long close() waits for workers to exit before terminating them
INTERRUPTED = (
    "a previous call to this vector env was interrupted (e.g. by Ctrl-C) while its sub-envs "
    "were busy, so they are out of step; close it and build a new one"
)


def default_context() -> str:
    """``"forkserver"`` where available, else ``"spawn"`` (see the module docstring)."""
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def available_cores() -> int:
    """CPU cores this process may run on (affinity-aware where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def split(num_envs: int, num_workers: int) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` slices of sub-envs, sizes differing by at most one."""
    base, extra = divmod(num_envs, num_workers)
    bounds, lo = [], 0
    for w in range(num_workers):
        hi = lo + base + (1 if w < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def build_env(env_fn: EnvFn, index: int) -> Any:
    """Call one env factory in this process; errors name the sub-env."""
    try:
        return env_fn()
    except Exception as exc:
        raise SubEnvError(
            f"sub-env {index} could not be built: {type(exc).__name__}: {exc}",
            env_index=index,
            exc_type=type(exc).__name__,
        ) from exc


class SyncBackend:
    """All sub-envs in this process, one after another (debugging, tiny envs)."""

    num_workers = 0

    def __init__(self, envs: Sequence[Any], layout: VectorLayout) -> None:
        for i, env in enumerate(envs):
            check_compatible(env, layout, i)
        self._raw = bytearray(layout.nbytes())
        self.bufs: Buffers = layout.buffers(self._raw)
        self.runner = SubEnvRunner(envs, 0, self.bufs, layout)
        self._interrupted = False

    @property
    def pids(self) -> list[int]:
        """No worker processes in sync mode."""
        return []

    def reset(self, seeds: Sequence[int | None], options: dict | None) -> ResetResult:
        """Reset every sub-env (see ``SubEnvRunner.reset``)."""
        return self._call(self.runner.reset, seeds, options)

    def step(self) -> StepResult:
        """Step every sub-env (see ``SubEnvRunner.step``)."""
        return self._call(self.runner.step)

    def close(self) -> None:
        """Close the sub-envs."""
        self.runner.close()

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        if self._interrupted:
            raise RuntimeError(INTERRUPTED)
        try:
            return method(*args)
        except Exception as exc:
            i = self.runner.current
            raise SubEnvError(
                f"sub-env {i} raised {type(exc).__name__}: {exc}",
                env_index=i,
                exc_type=type(exc).__name__,
            ) from exc
        except BaseException:  # Ctrl-C half-way: some sub-envs stepped, others not
            self._interrupted = True
            raise


class AsyncBackend:
    """Sub-envs split over ``num_workers`` processes that write into shared memory."""

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        layout: VectorLayout,
        num_workers: int,
        context: str | None = None,
    ) -> None:
        # typeshed types get_context(str) as BaseContext, which lacks Process; the context of
        # every start method has it
        ctx = cast(
            "ForkServerContext | SpawnContext | ForkContext",
            mp.get_context(context or default_context()),
        )
        self._raw = ctx.RawArray(ctypes.c_ubyte, layout.nbytes())
        self.bufs: Buffers = layout.buffers(self._raw)
        self.slices = split(len(env_fns), num_workers)
        self.num_workers = num_workers
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._pending = False
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns, False)
        try:
            for w, (lo, hi) in enumerate(self.slices):
                fns = pickle.dumps([CloudpickleWrapper(f) for f in env_fns[lo:hi]])
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_main,
                    name=f"distmarl-env-worker-{w}",
                    args=(lo, fns, layout, self._raw, child),
                    daemon=True,
                )
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
            self._gather()  # each worker answers once its sub-envs are built and checked
        except BaseException:
            self._finalizer()
            raise

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [p.pid for p in self._procs]

    def reset(self, seeds: Sequence[int | None], options: dict | None) -> ResetResult:
        """Reset every sub-env; each worker gets the seeds of its slice."""
        self._send([("reset", (list(seeds[lo:hi]), options)) for lo, hi in self.slices])
        return [item for part in self._gather() for item in part]

    def step(self) -> StepResult:
        """Step every sub-env with the actions already written to ``bufs.action``."""
        self._send([("step", None)] * self.num_workers)
        return [item for part in self._gather() for item in part]

    def close(self) -> None:
        """Ask workers to exit (terminate them if a call was interrupted or they hang)."""
        if self._finalizer.detach() is not None:
            _shutdown(self._procs, self._conns, not self._pending)

    # -- messaging ---------------------------------------------------------------------------

    def _send(self, messages: list[tuple[str, Any]]) -> None:
        if self._pending:
            raise RuntimeError(INTERRUPTED)
        self._pending = True
        for conn, msg in zip(self._conns, messages, strict=True):
            with contextlib.suppress(OSError):  # a dead worker: _gather reports its exit code
                conn.send(msg)

    def _gather(self) -> list[Any]:
        results = [self._receive(w) for w in range(len(self._conns))]
        self._pending = False
        return results

    def _receive(self, w: int) -> Any:
        conn, proc = self._conns[w], self._procs[w]
        while True:
            try:
                if conn.poll(_POLL_S):
                    status, payload = conn.recv()
                    break
            except (EOFError, OSError):
                status, payload = "died", None
                break
            if not proc.is_alive() and not conn.poll():
                status, payload = "died", None
                break
        if status == "ok":
            return payload
        self._finalizer()  # shut every worker down before raising
        raise self._error(w, status, payload)

    def _error(self, w: int, status: str, payload: Any) -> SubEnvError:
        lo, hi = self.slices[w]
        proc = self._procs[w]
        if status == "died":
            proc.join(1.0)
            code = proc.exitcode
            how = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"code {code}"
            return SubEnvError(
                f"worker process {w} (pid {proc.pid}, sub-envs {lo}..{hi - 1}) died with exit "
                f"{how}; the vector env was closed",
                env_index=lo if hi - lo == 1 else None,
                worker=w,
            )
        index, verb, exc_type, message, tb = payload
        return SubEnvError(
            f"sub-env {index} (worker process {w}, pid {proc.pid}) {verb} {exc_type}: {message}"
            f"; the vector env was closed\n--- traceback in the sub-process ---\n{tb}",
            env_index=index,
            worker=w,
            exc_type=exc_type,
            remote_traceback=tb,
        )


def _shutdown(procs: list[Any], conns: list[Connection], graceful: bool) -> None:
    """Stop worker processes: politely when ``graceful``, then terminate, then kill."""
    if graceful:
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.send(("close", None))
        for proc in procs:
            proc.join(_JOIN_S)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(_JOIN_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for conn in conns:
        conn.close()


def _worker_main(
    start: int, env_fns: bytes, layout: VectorLayout, raw: Any, conn: Connection
) -> None:
    """Body of a worker process: build its sub-envs, then serve reset / step until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    runner: SubEnvRunner | None = None
    index = start
    try:
        try:
            envs = []
            for j, fn in enumerate(pickle.loads(env_fns)):
                index = start + j
                envs.append(fn())
                check_compatible(envs[-1], layout, index)
            runner = SubEnvRunner(envs, start, layout.buffers(raw), layout)
        except BaseException as exc:
            conn.send(("error", _describe(index, exc, "could not be built:")))
            for env in envs:
                env.close()
            return
        conn.send(("ok", None))
        while True:
            try:
                command, data = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                return
            if command == "close":
                return
            try:
                result = runner.step() if command == "step" else runner.reset(*data)
                conn.send(("ok", result))
            except BaseException as exc:
                conn.send(("error", _describe(runner.current, exc)))
                return
    finally:
        if runner is not None:
            runner.close()
        conn.close()


def _describe(index: int, exc: BaseException, verb: str = "raised") -> tuple[Any, ...]:
    return index, verb, type(exc).__name__, str(exc), traceback.format_exc()
