"""``distmarl check-env``: is an env ready to train, and with what?

Builds the env of a spec, runs PettingZoo's own ``parallel_api_test``, then distmarl's
checks: each agent's observation and action spaces as its networks read them, action masks,
the global ``state()`` (MAPPO's value networks read it), agent groups (agents named
``<group>_<i>`` share networks), render modes (``distmarl play`` and ``tracking.videos`` need
``rgb_array``), a probe of random legal steps (turns, masks, zero-sum rewards), which
algorithms build for the spaces, and whether the game needs a ``league:`` section.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymnasium import spaces

#: steps of PettingZoo's API test
API_TEST_CYCLES = 200


@dataclass
class EnvCheck:
    """What the checks found: ``(ok, line)`` in order (ok None: information), and per
    algorithm None where it builds or the reason it does not."""

    lines: list[tuple[bool | None, str]] = field(default_factory=list)
    algorithms: dict[str, str | None] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """No check failed and at least one algorithm fits."""
        return all(ok is not False for ok, _ in self.lines) and any(
            reason is None for reason in self.algorithms.values())

    def say(self, ok: bool | None, line: str) -> None:
        self.lines.append((ok, line))

    def text(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "    "}
        out = [f"{mark[ok]} {line}" for ok, line in self.lines]
        fits = [n for n, r in self.algorithms.items() if r is None]
        out.append(f"{'ok  ' if fits else 'FAIL'} algorithms that fit: "
                   f"{', '.join(fits) if fits else 'none'}")
        out += [f"     {n} does not: {r}" for n, r in self.algorithms.items() if r is not None]
        return "\n".join(out)


def check_env(spec: str, kwargs: Mapping[str, Any], seed: int = 0) -> EnvCheck:
    """Every check of the module on ``make_env(spec, **kwargs)``."""
    from distmarl.envs.make import make_env

    out = EnvCheck()
    env = make_env(spec, light=False, **kwargs)
    try:
        _api_test(env, out)
    finally:
        with contextlib.suppress(Exception):
            env.close()
    env = make_env(spec, **kwargs)
    try:
        _spaces(env, out)
        _probe(spec, env, seed, out)
        _algorithms(env, out)
    finally:
        with contextlib.suppress(Exception):
            env.close()
    return out


def _api_test(env: Any, out: EnvCheck) -> None:
    from pettingzoo.test import parallel_api_test

    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            parallel_api_test(env, num_cycles=API_TEST_CYCLES)
    except Exception as err:
        out.say(False, f"PettingZoo's parallel_api_test: {type(err).__name__}: {err}")
        return
    out.say(True, "PettingZoo's parallel_api_test passed")


def _spaces(env: Any, out: EnvCheck) -> None:
    from distmarl.agents import agent_groups
    from distmarl.algorithms.common.observations import ObsReader
    from distmarl.networks.inputs import MASK_KEY

    agents = list(env.possible_agents)
    groups = agent_groups(agents)
    out.say(None, f"agents: {', '.join(agents)}; groups (sharing networks where their spaces "
                  f"match): {', '.join(f'{g} ({len(m)})' for g, m in groups.items())}")
    for a in agents:
        obs, act = env.observation_space(a), env.action_space(a)
        try:
            reads = ObsReader(obs).input.to_dict()["kind"]
        except Exception as err:
            out.say(False, f"{a}: observation {obs} cannot be read: {err}")
            continue
        masked = isinstance(obs, spaces.Dict) and MASK_KEY in obs.spaces
        ok = isinstance(act, spaces.Box | spaces.Discrete)
        out.say(ok, f"{a}: observation read as {reads}{', action mask in it' if masked else ''};"
                    f" action {act}" + ("" if ok else " (distmarl acts in Box or Discrete)"))
    try:
        state = env.state()
        out.say(None, f"state(): shape {getattr(state, 'shape', '?')}, MAPPO's value networks "
                      "read it")
    except Exception:
        out.say(None, "state(): none, MAPPO's value networks read every agent's observation")
    modes = (getattr(env, "metadata", None) or {}).get("render_modes", [])
    out.say(None, f"render modes: {', '.join(modes) if modes else 'none'}"
                  + ("" if "rgb_array" in modes else
                     " (distmarl play and tracking.videos record rgb_array only)"))


def _probe(spec: str, env: Any, seed: int, out: EnvCheck) -> None:
    from distmarl.envs.competitive import competitive_warning
    from distmarl.envs.probe import EnvProbeError, probe

    try:
        report = probe(env, seed)
    except EnvProbeError as err:
        out.say(False, f"random legal steps: {err}")
        return
    out.say(True, f"{report.steps} random legal steps: "
                  f"{'turns' if report.turn_based else 'simultaneous moves'}, "
                  f"{'action masks' if report.masked else 'no action masks'}, "
                  f"{report.scored_steps} scored ({report.zero_sum_steps} zero-sum)")
    warning = competitive_warning(spec, report)
    if warning is None:
        out.say(None, "league: not needed (the rewards look cooperative)")
        return
    looks, _, advice = warning.partition(" but the config has no league: section")
    out.say(None, f"league: {looks.removeprefix(f'env.spec {spec!r} ')}; "
                  f"{advice.rpartition('To rate members by their games, ')[2]}")


def _algorithms(env: Any, out: EnvCheck) -> None:
    from distmarl.algorithms.registry import ALGORITHMS

    agents = list(env.possible_agents)
    obs = {a: env.observation_space(a) for a in agents}
    act = {a: env.action_space(a) for a in agents}
    state = getattr(env, "state_space", None)
    state = state if isinstance(state, spaces.Box) else None
    for name, cls in ALGORITHMS.items():
        extra: dict[str, Any] = ({"state_space": state}
                                 if cls.rollout_spec(None, state).global_state else {})
        try:
            cls(obs, act, None, seed=0, **extra)
            out.algorithms[name] = None
        except (ValueError, KeyError, TypeError) as err:
            out.algorithms[name] = str(err)
