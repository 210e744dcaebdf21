"""Watching members play: their greedy episodes on one env of the run's config, rendered.

Each agent is played by the first of the given members that plays it (``explore=False``, as
evaluations act): one member, or a league's sides' elites against each other. An agent no
member plays (the other side, when only one side's member plays) takes uniformly random legal
actions. With ``render_mode="rgb_array"`` each step's frame is kept, for
:func:`write_video`; with ``"human"`` the env draws its own window.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distmarl.config import ExperimentConfig
from distmarl.networks.inputs import MASK_KEY

#: what a video is written as, by its suffix
VIDEO_SUFFIXES = (".gif", ".mp4")


@dataclass
class Played:
    """Each episode's summed reward over the agents and its steps; the frames in order."""

    returns: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)


def make_render_env(cfg: ExperimentConfig, render_mode: str) -> Any:
    """One env of ``cfg`` (its spec, kwargs and wrappers) rendering in ``render_mode``."""
    from distmarl.envs import make_env, parse_wrappers

    kwargs = {**cfg.env.kwargs, "render_mode": render_mode}
    return make_env(cfg.env.spec, wrappers=parse_wrappers(cfg.env.wrappers), **kwargs)


def renders_frames(cfg: ExperimentConfig) -> bool:
    """Whether the env of ``cfg`` says it renders ``rgb_array`` frames."""
    from distmarl.envs import make_env

    env = make_env(cfg.env.spec, **cfg.env.kwargs)
    try:
        return "rgb_array" in (getattr(env, "metadata", None) or {}).get("render_modes", [])
    finally:
        env.close()


def play(cfg: ExperimentConfig, policies: Sequence[Any], episodes: int = 1, seed: int = 0,
         render_mode: str = "rgb_array",
         seats: Sequence[Collection[str] | None] | None = None) -> Played:
    """``episodes`` greedy episodes of ``policies`` (algorithms) on an env of ``cfg``, seeded
    ``seed``, ``seed + 1``, ...; each ends when every agent is done or at
    ``env.max_episode_steps``. ``seats[i]``: the agents policy ``i`` plays (None, or no
    ``seats``: every agent it has, as the first to have it); a policy may also be a scripted
    player (a league reference: ``act`` alone), which plays its seats."""
    from distmarl.envs.limits import resolve_limit

    env = make_render_env(cfg, render_mode)
    rng = np.random.default_rng(seed)
    out = Played()
    try:
        playing = [_seats(p, s, env.possible_agents)
                   for p, s in zip(policies, seats or [None] * len(policies), strict=True)]
        limit = resolve_limit(cfg.env.max_episode_steps, env)
        for episode in range(episodes):
            obs, infos = env.reset(seed=seed + episode)
            _keep_frame(env, render_mode, out)
            total, steps = 0.0, 0
            while env.agents and steps < limit:
                obs, rew, _, _, infos = env.step(
                    _actions(env, policies, playing, obs, infos, rng))
                total += float(sum(np.sum(r) for r in rew.values()))
                steps += 1
                _keep_frame(env, render_mode, out)
            out.returns.append(total)
            out.steps.append(steps)
    finally:
        env.close()
    return out


def _seats(policy: Any, seats: Collection[str] | None, everyone: Collection[str]) -> set[str]:
    """The agents ``policy`` plays: ``seats`` that it has (an algorithm's ``agents``; a
    scripted player has none and plays whatever it is handed), else all it has (a scripted
    player: ``everyone``, the env's agents)."""
    has = getattr(policy, "agents", None)
    if seats is None:
        return set(everyone if has is None else has)
    return set(seats) & set(seats if has is None else has)


def _actions(env: Any, policies: Sequence[Any], playing: Sequence[set[str]],
             obs: Mapping[str, Any], infos: Mapping[str, Any], rng: np.random.Generator
             ) -> dict[str, Any]:
    """Each policy's greedy actions for the agents it plays (a batch of one each), random
    legal ones for the agents none plays."""
    actions: dict[str, Any] = {}
    for policy, agents in zip(policies, playing, strict=True):
        mine = {a: _batch_of_one(obs[a], infos.get(a, {})) for a in env.agents
                if a in agents and a not in actions}
        if mine:
            actions |= {a: x[0] for a, x in policy.act(mine, explore=False).items()}
    for a in env.agents:
        if a not in actions:
            mask = _mask_of(obs[a], infos.get(a, {}))
            seed = int(rng.integers(2**31))
            space = env.action_space(a)
            space.seed(seed)
            actions[a] = space.sample(None if mask is None else mask.astype(np.int8))
    return actions


def _batch_of_one(x: Any, info: Mapping[str, Any]) -> Any:
    """One agent's observation as a batch of one, its info's action mask folded in."""
    if isinstance(x, Mapping):
        return {k: np.asarray(v)[None] for k, v in x.items()}
    mask = info.get(MASK_KEY) if isinstance(info, Mapping) else None
    if mask is not None:
        return {"observation": np.asarray(x)[None], MASK_KEY: np.asarray(mask)[None]}
    return np.asarray(x)[None]


def _mask_of(x: Any, info: Mapping[str, Any]) -> np.ndarray | None:
    mask = x.get(MASK_KEY) if isinstance(x, Mapping) else None
    if mask is None and isinstance(info, Mapping):
        mask = info.get(MASK_KEY)
    return None if mask is None else np.asarray(mask)


def _keep_frame(env: Any, render_mode: str, out: Played) -> None:
    if render_mode == "rgb_array":
        frame = env.render()
        if frame is not None:
            out.frames.append(np.asarray(frame))
        return
    if render_mode == "human":
        env.render()


def write_video(frames: list[np.ndarray], path: Path, fps: int = 15) -> Path:
    """``frames`` as a GIF (Pillow, through imageio) or an MP4 (needs imageio-ffmpeg: the
    ``video`` extra), by ``path``'s suffix; ``path``."""
    import imageio

    path = Path(path)
    if path.suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"video {path}: name a .gif or .mp4 file")
    if not frames:
        raise ValueError("no frames to write: the env rendered nothing in rgb_array mode")
    path.parent.mkdir(parents=True, exist_ok=True)
    images: list[Any] = list(frames)
    if path.suffix == ".gif":
        imageio.mimsave(path, images, duration=1000 / fps, loop=0)
        return path
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ValueError(f"video {path}: MP4 needs imageio-ffmpeg (pip install "
                         "'distmarl[video]'); a .gif needs nothing more")
    imageio.mimsave(path, images, fps=fps, macro_block_size=1)
    return path
