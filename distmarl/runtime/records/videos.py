"""Videos of a run's members playing, for its records: GIFs in ``<run dir>/videos/`` and in
the tracking run's ``videos/`` artifacts.

The game (:meth:`~distmarl.runtime.hooks.base.GameHooks.videos`) says who plays in each video, as seats:
``(player, agents)`` where ``player`` is a member index or a reference's name (``"minimax"``,
a league's scripted opponent) and ``agents`` the agents it plays (None: all it has); agents
no seat plays take random legal moves. At the end of a run every video the game names is
recorded (``elite.gif``; in a league also each side's elite against each reference
opponent), and with ``tracking.video_every_generations`` the current elite's ``elite`` video
every so many generations (``generation_<g>.gif``), so a user can watch play improve.

Each video is one greedy episode seeded with ``evolution.final_seed``, played in the
coordinator's process: an env of the run's config built there to render frames, each member
acting with the weights it last published
(:class:`~distmarl.runtime.records.policies.PublishedPolicies`: actors only, no learner state).
Recording is best effort: a failure is a warning, never a stopped run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from distmarl.algorithms import Policy
from distmarl.tracking.base import Tracker

__all__ = ["Seat", "VideoRecorder"]

log = logging.getLogger(__name__)

#: who plays which agents in a video: a member index or a reference's name, and its agents
Seat = tuple[int | str, list[str] | None]


class VideoRecorder:
    """Records videos of the run whose config is ``config`` (plain data) into
    ``run_dir / "videos"`` and ``tracker``; ``policy(member)`` is a member acting with its
    published weights."""

    def __init__(self, config: Mapping[str, Any], run_dir: Path,
                 policy: Callable[[int], Policy], tracker: Callable[[], Tracker]) -> None:
        self.config, self.folder = config, run_dir / "videos"
        self.policy, self.tracker = policy, tracker
        self._renders: bool | None = None

    def renders(self) -> bool:
        """Whether the run's env renders ``rgb_array`` frames (asked once)."""
        if self._renders is None:
            from distmarl.collect.play import renders_frames

            try:
                self._renders = renders_frames(self._cfg())
            except Exception as err:
                log.warning("could not ask the env for its render modes: %s", err)
                self._renders = False
        return self._renders

    def record_all(self, videos: Mapping[str, Sequence[Seat]]) -> list[Path]:
        """Each of ``videos`` (file stem -> seats) recorded; the files written."""
        if not self.renders():
            return []
        paths = [self.record(name, seats) for name, seats in videos.items()]
        return [p for p in paths if p is not None]

    def record(self, name: str, seats: Sequence[Seat]) -> Path | None:
        """``videos/<name>.gif``: ``seats`` playing one greedy episode together, written and
        logged; None (and no file) where the env renders no frames or playing failed."""
        if not self.renders():
            return None
        from distmarl.collect.play import play, write_video

        cfg = self._cfg()
        try:
            policies = [self._player(player, agents, cfg) for player, agents in seats]
            played = play(cfg, policies, episodes=1, seed=cfg.evolution.final_seed,
                          seats=[agents for _, agents in seats])
            path = write_video(played.frames, self.folder / f"{name}.gif")
        except Exception as err:
            log.warning("could not record the video %s: %s", name, err)
            return None
        tracker = self.tracker()
        tracker.log_artifact(path, "videos")
        tracker.flush()
        return path

    def _player(self, player: int | str, agents: list[str] | None, cfg: Any) -> Any:
        """A member acting with its published weights, or a reference built for
        ``agents``."""
        if isinstance(player, str):
            from distmarl.factory import env_spaces
            from distmarl.league.references import make_reference

            spaces = env_spaces(cfg.env)
            return make_reference(player, agents or list(spaces.observation),
                                  spaces.observation, spaces.action, cfg.env.kwargs,
                                  cfg.evolution.final_seed)
        return self.policy(player)

    def _cfg(self) -> Any:
        from distmarl.config.stored import stored_config

        return stored_config(self.config)
