"""Reset an env and take a few random legal steps before a run starts.

An env can build and still fail on ``reset`` or ``step`` (a simulator whose native library
does not match, a missing asset). Found there, the failure is a config error naming the env and
the phase; found in a rollout worker, it is a dead actor. :func:`probe` does the steps and
reports what they showed of the game (turns, action masks, zero-sum rewards: see
:mod:`distmarl.envs.competitive`).

:class:`ProbeRun` does it in a short-lived child process (``python -m distmarl.envs.probe``),
so that a crash in native code (``Fatal Python error: Aborted``) is reported too, with the
phase it died in and the end of its output. It starts while the caller builds the algorithm,
so most of its start-up (about 0.2 s) is hidden.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

#: At most this many steps (across episodes) and this many seconds of stepping per probe.
PROBE_STEPS = 64
PROBE_SECONDS = 0.5
#: Seconds a child probe may take before it counts as hung.
PROBE_TIMEOUT = 300.0
#: Lines of a crashed child's output quoted in the error.
OUTPUT_LINES = 8


class ProbeReport(NamedTuple):
    """What a probe saw. ``turn_based``: one agent acts per step (the infos name the
    ``active_agent``); ``masked``: observations or infos carry action masks; ``scored_steps``:
    steps with a nonzero reward, of which ``zero_sum_steps`` summed to exactly 0 over all
    agents."""

    agents: tuple[str, ...]
    steps: int
    turn_based: bool
    masked: bool
    scored_steps: int
    zero_sum_steps: int


class EnvProbeError(RuntimeError):
    """The env failed in ``phase`` (``"build"``, ``"reset"`` or ``"step"``); ``detail`` says
    how."""

    def __init__(self, phase: str, detail: str) -> None:
        super().__init__(f"the env failed on {phase}: {detail}")
        self.phase = phase
        self.detail = detail

    def __reduce__(self) -> tuple:
        return (type(self), (self.phase, self.detail))


def _mask(obs: Any, info: Any) -> np.ndarray | None:
    """An agent's action mask, from its ``{"observation", "action_mask"}`` observation or its
    info's ``action_mask``; None when it has none."""
    for source in (obs, info):
        if isinstance(source, Mapping) and source.get("action_mask") is not None:
            return np.asarray(source["action_mask"])
    return None


def random_actions(env: Any, obs: Mapping[str, Any], infos: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """A uniform random action per live agent, among the legal ones where a Discrete agent
    has a mask with a legal action (seed the action spaces for repeatable picks)."""
    out = {}
    for agent in env.agents:
        space = env.action_space(agent)
        mask = _mask(obs.get(agent), infos.get(agent))
        legal = None if mask is None else mask.astype(np.int8).reshape(-1)
        if isinstance(space, spaces.Discrete) and legal is not None and legal.any():
            out[agent] = space.sample(mask=legal)
        else:
            out[agent] = space.sample()
    return out


def probe(env: Any, seed: int, *, steps: int = PROBE_STEPS, seconds: float = PROBE_SECONDS,
          on_phase: Callable[[str], None] = lambda phase: None) -> ProbeReport:
    """Reset ``env`` (seeded) and step it with :func:`random_actions`, resetting when an
    episode ends, for at least one step and at most ``steps`` steps or ``seconds`` seconds.
    ``on_phase`` hears ``"reset"`` / ``"step"`` before each call. EnvProbeError naming the
    phase when the env raises."""
    agents = tuple(env.possible_agents)
    for i, agent in enumerate(agents):
        env.action_space(agent).seed(seed + i)  # distinct streams: equal ones tie every game
    obs, infos = _call(on_phase, "reset", lambda: env.reset(seed=seed))
    turn_based = any(isinstance(i, Mapping) and "active_agent" in i for i in infos.values())
    masked = any(_mask(obs.get(a), infos.get(a)) is not None for a in obs)
    scored = zero_sum = done = 0
    deadline = time.monotonic() + seconds
    while done < steps and (done == 0 or time.monotonic() < deadline):
        actions = random_actions(env, obs, infos)
        obs, rewards, _, _, infos = _call(on_phase, "step", functools.partial(env.step, actions))
        done += 1
        kind = _reward_kind(rewards)
        scored += kind != "none"
        zero_sum += kind == "zero_sum"
        if not env.agents:
            obs, infos = _call(on_phase, "reset", lambda: env.reset())
    return ProbeReport(agents, done, turn_based, masked, scored, zero_sum)


def _reward_kind(rewards: Mapping[str, Any]) -> str:
    """``"none"`` (all rewards 0, or not scalars), ``"zero_sum"`` (nonzero rewards summing to
    exactly 0, up to rounding) or ``"other"``."""
    try:
        values = np.asarray([float(r) for r in rewards.values()], dtype=np.float64)
    except (TypeError, ValueError):
        return "none"
    if not values.size or not np.any(values != 0) or not np.all(np.isfinite(values)):
        return "none"
    return "zero_sum" if abs(values.sum()) <= 1e-9 * np.abs(values).max() else "other"


def _call(on_phase: Callable[[str], None], phase: str, fn: Callable[[], Any]) -> Any:
    on_phase(phase)
    try:
        return fn()
    except Exception as exc:
        raise EnvProbeError(phase, f"{type(exc).__name__}: {exc}") from exc


def probe_spec(spec: str, kwargs: Mapping[str, Any], wrappers: Sequence[Any], seed: int,
               steps: int = PROBE_STEPS,
               on_phase: Callable[[str], None] = lambda phase: None) -> ProbeReport:
    """Build the env of ``spec`` (``wrappers`` as written in ``env.wrappers``) and
    :func:`probe` it for up to ``steps`` steps; a failure while building is an EnvProbeError
    of phase ``"build"``."""
    from distmarl.envs.make import make_env
    from distmarl.envs.preprocess import parse_wrappers

    on_phase("build")
    try:
        env = make_env(spec, wrappers=parse_wrappers(wrappers), **kwargs)
    except Exception as exc:
        raise EnvProbeError("build", f"{type(exc).__name__}: {exc}") from exc
    try:
        return probe(env, seed, steps=steps, on_phase=on_phase)
    finally:
        with contextlib.suppress(Exception):  # a failed close says nothing about the run
            env.close()


class ProbeRun:
    """:func:`probe_spec` in a child process, started on construction; :meth:`result` waits
    for it. Arguments that cannot be pickled for the child are probed in this process
    (where a crash in native code cannot be caught)."""

    def __init__(self, spec: str, kwargs: Mapping[str, Any], wrappers: Sequence[Any],
                 seed: int, steps: int = PROBE_STEPS, timeout: float = PROBE_TIMEOUT) -> None:
        self.args = (spec, dict(kwargs), list(wrappers), seed, steps)
        self.timeout = timeout
        self.folder = tempfile.TemporaryDirectory(prefix="distmarl-probe-")
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            request = pickle.dumps(self.args)
        except Exception:
            return
        (Path(self.folder.name) / "request.pkl").write_bytes(request)
        path = os.pathsep.join(p for p in sys.path if p)  # what imports here imports there
        with contextlib.suppress(OSError):  # no interpreter to start: probe in this process
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "distmarl.envs.probe", self.folder.name],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": path})

    def result(self) -> ProbeReport:
        """The probe's report, or EnvProbeError (also when the child died or hung)."""
        try:
            if self.proc is None:
                return probe_spec(*self.args)
            return self._child_result(self.proc)
        finally:
            self.folder.cleanup()

    def cancel(self) -> None:
        """Stop the child (when the caller gives up for another error)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        self.folder.cleanup()

    def _child_result(self, proc: subprocess.Popen[bytes]) -> ProbeReport:
        folder = Path(self.folder.name)
        try:
            output, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise EnvProbeError(_phase(folder), f"no answer within {self.timeout:.0f} s") from None
        answer = folder / "result.pkl"
        if answer.exists():
            result = pickle.loads(answer.read_bytes())
            if isinstance(result, EnvProbeError):
                raise result
            return result
        code = proc.returncode
        how = (f"killed its process ({signal.Signals(-code).name}: a crash in native code)"
               if code < 0 else f"ended its process with exit code {code}")
        quoted = "".join(f"\n  | {line}" for line in crash_lines(output.decode(errors="replace")))
        raise EnvProbeError(_phase(folder), f"{how}; its output:{quoted}")


def crash_lines(output: str) -> list[str]:
    """What to quote of a crashed child's ``output``: around a ``Fatal Python error`` (the
    native library's own lines before it, the error, the innermost Python frames of its
    stack), else the last :data:`OUTPUT_LINES` lines."""
    lines = [line for line in output.splitlines() if line.strip()]
    fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")),
                 None)
    if fatal is None:
        return lines[-OUTPUT_LINES:]
    frames = [line for line in lines[fatal + 1:] if line.lstrip().startswith("File ")][:3]
    return [*lines[max(0, fatal - 3):fatal + 1], *frames]


def _phase(folder: Path) -> str:
    marker = folder / "phase"
    return marker.read_text() if marker.exists() else "start"


def _main(folder: Path) -> None:
    """The child: probe the env of ``folder/request.pkl``, mark each phase in
    ``folder/phase``, write the report (or the EnvProbeError) to ``folder/result.pkl``."""
    faulthandler.enable()  # a native crash prints the Python stack it happened under
    spec, kwargs, wrappers, seed, steps = pickle.loads((folder / "request.pkl").read_bytes())

    def mark(phase: str) -> None:
        (folder / "phase").write_text(phase)

    try:
        result: Any = probe_spec(spec, kwargs, wrappers, seed, steps, on_phase=mark)
    except EnvProbeError as err:
        result = EnvProbeError(err.phase, err.detail)  # without the unpicklable cause
    (folder / "result.pkl").write_bytes(pickle.dumps(result))


if __name__ == "__main__":  # the report's classes must be this module's, not __main__'s
    from distmarl.envs.probe import _main as main

    main(Path(sys.argv[1]))
