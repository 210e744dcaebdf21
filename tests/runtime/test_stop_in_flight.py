"""A stop takes seconds whatever is in flight: evaluations, league games and final games look
at it between env steps. The game never ends (``tests.envs.toy_envs:EndlessEnv`` with a step
limit no evaluation reaches), so only the stop can end the evaluation in flight; the run then
writes its checkpoint and ends as stopped, without counting the games it cut. In process
(``--local``) and on Ray, where the fleet cancels the workers' calls.

Also here: a stop during the final evaluation (the run then ends as stopped, without a final
score); without a run, a play loop stops at the step its :class:`Cancel` is set."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from distmarl.agents import resolve_sides
from distmarl.collect import RandomPolicy, evaluate
from distmarl.collect.cancel import NEVER, Cancelled
from distmarl.config import load_config
from distmarl.envs import make_vector_env
from distmarl.league.seating import play_games
from distmarl.runtime.logic.stop_request import StopRequest, interruption

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
ENDLESS = "tests.envs.toy_envs:EndlessEnv"
#: a step limit no evaluation reaches while the test runs
NEVER_CUT = 10**9
#: env steps per member between generations: the first evaluation starts after these
EVO_STEPS = 40
#: seconds from the stop to the end of the run (checkpoint included), under the 30 s
#: Kubernetes and Slurm give, with room for a loaded machine (it takes about 1 s in process
#: and 2 s on Ray on an idle 2-core machine; the evaluation alone would never end)
BOUND_S = 20.0
REASON = "stopped by SIGTERM"


class StopAfter:
    """A stop set after ``steps`` looks (a play's env steps)."""

    def __init__(self, steps: int) -> None:
        self.steps, self.looks = steps, 0

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks > self.steps


def test_a_play_stops_at_the_step_its_stop_is_set() -> None:
    with make_vector_env(ENDLESS, 2, mode="sync", seed=0, max_episode_steps=NEVER_CUT) as venv:
        agents = list(venv.possible_agents)
        obs_spaces = {a: venv.single_observation_space(a) for a in agents}
        act_spaces = {a: venv.single_action_space(a) for a in agents}
        policy = RandomPolicy(act_spaces, 0)
        stop = StopAfter(5)
        with pytest.raises(Cancelled):
            evaluate(venv, policy, episodes=1, cancel=stop)
        assert stop.looks == 6  # 5 steps, then the look that stopped it
        sides = resolve_sides(agents, obs_spaces, act_spaces, None, symmetric=True)
        assert sides is not None
        with pytest.raises(Cancelled):
            play_games(venv, sides, None, ("member/0", policy), ("ref/random", policy), 4, 0,
                       cancel=StopAfter(3))
    with make_vector_env(ENDLESS, 2, mode="sync", seed=0, max_episode_steps=4) as venv:
        assert evaluate(venv, policy, episodes=1, cancel=NEVER) == [4.0, 4.0]


def test_only_an_interrupting_stop_cuts_plays() -> None:
    """A signal's stop cuts evaluations and games; a planned stop lets them (and the final
    evaluation) finish; a plain Event is a planned stop."""
    planned, signal = StopRequest(), StopRequest()
    assert not planned.interruption.is_set() and not signal.interruption.is_set()
    planned.request("stopped")
    signal.request(REASON, interrupted=True)
    assert planned.is_set() and not interruption(planned).is_set()
    assert interruption(signal).is_set()
    assert interruption(threading.Event()) is NEVER


def _config(tmp_path: Path, *more: str) -> Any:
    return load_config(TINY, [
        f"env.spec={ENDLESS}", "env.kwargs={}", f"env.max_episode_steps={NEVER_CUT}",
        "league.symmetric=true", "league.eval_games=4", "evolution.final_episodes=4",
        "training.max_steps_per_member=100000", f"evolution.evo_steps={EVO_STEPS}",
        "tracking.mlflow=false", f"tracking.directory={tmp_path}", *more])


def _league_evaluation(progress: dict[str, Any]) -> bool:
    """Every member has reached its first evaluation (whose games never end)."""
    return bool(progress["env_steps"] >= 2 * EVO_STEPS)


def _final_evaluation(progress: dict[str, Any]) -> bool:
    """The run has trained its steps: its final evaluation (episodes that never end) runs."""
    return bool(progress["stop_reason"] == "max_steps")


def _stop_in_evaluation(cfg: Any, local: bool, under_way: Any = _league_evaluation
                        ) -> tuple[dict[str, Any], float]:
    """Train ``cfg``; once ``under_way(progress)`` says an evaluation is in flight, ask the
    run to stop as the driver does on SIGTERM. The summary, and the seconds from the stop to
    the run's end. (The run goes on in a thread, so a run that does not stop fails the test
    instead of hanging it.)"""
    from distmarl.runtime.driver.trainer import train

    coord: list[Any] = []
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["summary"] = train(cfg, run_dir=Path(cfg.tracking.directory) / "run",
                                   show_progress=False, local=local, on_coordinator=coord.append)
        except BaseException as err:
            out["error"] = err
        out["ended"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    progress, stop = _handles(coord, local)
    while not under_way(progress()):
        assert thread.is_alive(), out.get("error")
        time.sleep(0.1)
    time.sleep(1.0)  # the evaluation's episodes are under way (they never end)
    assert thread.is_alive()
    stopped = time.monotonic()
    stop()
    thread.join(BOUND_S)
    if thread.is_alive():
        _abandon(coord, local)
        pytest.fail(f"the run did not end within {BOUND_S} s of the stop")
    if "error" in out:
        raise out["error"]
    return out["summary"], out["ended"] - stopped


def _handles(coord: list[Any], local: bool) -> tuple[Any, Any]:
    """``(progress, stop)`` of the coordinator, once it exists."""
    deadline = time.monotonic() + 120
    while not coord:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.05)
    c = coord[0]
    if local:
        return c.progress, lambda: c.stop(REASON, interrupted=True)
    import ray

    return (lambda: ray.get(c.progress.remote()),
            lambda: ray.get(c.stop.remote(REASON, interrupted=True)))


def _abandon(coord: list[Any], local: bool) -> None:
    """A run that did not stop: end its coordinator actor (in process it is left to
    itself)."""
    if not local:
        import ray

        ray.kill(coord[0])


def _check_stopped(summary: dict[str, Any], seconds: float) -> None:
    assert seconds < BOUND_S
    assert summary["stop_reason"] == REASON
    assert summary["generations"] == 0  # the cut evaluation is no result
    assert summary["league"]["capped_games"] == {"training": 0, "evaluation": 0}
    assert all(not m["fitness"] for m in summary["members"])
    checkpoint = Path(summary["checkpoint"])
    assert checkpoint.is_dir() and any(checkpoint.iterdir())
    assert summary["env_steps"] >= 2 * EVO_STEPS  # the steps trained are kept


def test_a_stop_cuts_the_evaluation_in_flight_in_process(tmp_path: Path) -> None:
    summary, seconds = _stop_in_evaluation(_config(tmp_path), local=True)
    _check_stopped(summary, seconds)


def test_a_stop_cuts_the_final_evaluation_in_process(tmp_path: Path) -> None:
    """A cooperative run whose fitness evaluations end (``eval_steps``) but whose final
    evaluation, whole episodes, never does: stopped during it, the run ends as stopped,
    without a final score."""
    cfg = _config(tmp_path, "league.symmetric=false", f"training.max_steps_per_member={EVO_STEPS}",
                  "evolution.eval_steps=5", "evolution.final_episodes=2")
    summary, seconds = _stop_in_evaluation(cfg, local=True, under_way=_final_evaluation)
    assert seconds < BOUND_S
    assert summary["stop_reason"] == REASON and summary["final_score"] is None
    assert summary["generations"] == 1  # the run's own generation counts
    assert Path(summary["checkpoint"]).is_dir()


@pytest.mark.ray
def test_a_stop_cuts_the_evaluation_in_flight_on_ray(ray_local: Any, tmp_path: Path) -> None:
    # one learner process for both members (their workers in it): fewer processes to start
    cfg = _config(tmp_path, "population.members_per_learner=2")
    summary, seconds = _stop_in_evaluation(cfg, local=False)
    _check_stopped(summary, seconds)


#: seconds a play of the cancel test runs at most when nothing cancels it
PLAY_LIMIT_S = 30.0


class _Plays:
    """A host's worker thread in miniature: ``play`` calls run one at a time in a concurrency
    group of one thread, each until it is cancelled (as the rollout worker's play looks
    between env steps) or :data:`PLAY_LIMIT_S` has passed."""

    def play(self) -> str:
        from distmarl.runtime.actors.cancel import RayTaskCancel

        cancel, end = RayTaskCancel(), time.monotonic() + PLAY_LIMIT_S
        while time.monotonic() < end:
            if cancel.is_set():
                return "cancelled"
            time.sleep(0.001)
        return "played on"

    def ping(self) -> bool:
        return True


@pytest.mark.ray
def test_a_stop_ends_every_play_queued_on_one_thread(ray_local: Any) -> None:
    """Plays queued on one actor thread (a host's workers), stopped at moments from before
    the first starts to well after: every one ends before the wait gives up, none plays on
    (Ray may drop a cancel that reaches a call about to start: the fleet cancels again)."""
    import ray

    from distmarl.runtime.fleets.stoppable import CANCEL_WAIT_S, wait_unless_stopped

    stopped = threading.Event()
    stopped.set()
    actor = ray.remote(concurrency_groups={"worker": 1})(_Plays).remote()
    assert ray.get(actor.ping.remote())
    play = actor.play.options(concurrency_group="worker")
    try:
        for k in range(40):  # 1 to 4 plays, stopped 0 to 0.1 s after they were made
            refs = [play.remote() for _ in range(1 + k % 4)]
            time.sleep((0.0, 0.001, 0.01, 0.1)[k // 4 % 4])
            started = time.monotonic()
            with pytest.raises(Cancelled):
                wait_unless_stopped(refs, stopped)
            _, pending = ray.wait(refs, num_returns=len(refs), timeout=0)
            assert not pending, f"round {k}: {len(pending)} of {len(refs)} plays still running"
            assert time.monotonic() - started < CANCEL_WAIT_S
    finally:
        ray.kill(actor)
