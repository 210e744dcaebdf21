"""The elite model and video of a tracked run, in process: built from the elite's published
weights (its actors alone), the model acts as the elite's actors in the final checkpoint do, and
the video is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distmarl.config import load_config
from tests.tracking.test_mlflow_run import no_process_tracking_uri  # noqa: F401  (autouse)

pytestmark = [pytest.mark.slow]

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"


def test_the_elite_model_acts_as_the_elites_final_actors(tmp_path: Path) -> None:
    import mlflow

    from distmarl.checkpoint import load_checkpoint
    from distmarl.factory import env_spaces, make_algorithm
    from distmarl.runtime.driver.trainer import train

    cfg = load_config(TINY, [f"tracking.directory={tmp_path}",
                             "training.max_steps_per_member=400", "evolution.final_episodes=2"])
    summary = train(cfg, run_dir=tmp_path / "run", show_progress=False, local=True)
    assert (tmp_path / "run" / "videos" / "elite.gif").stat().st_size > 0
    mlflow.set_tracking_uri(summary["mlflow"]["uri"])
    model = mlflow.pytorch.load_model(summary["elite_model_uri"])
    spaces = env_spaces(cfg.env)
    elite = make_algorithm(cfg.algorithm, spaces, seed=0)
    elite.load_state_dict(load_checkpoint(Path(summary["checkpoint"])).members[
        summary["elite"]]["algo"])
    rng = np.random.default_rng(0)
    obs = {a: rng.standard_normal((8, *s.shape)).astype(np.float32)
           for a, s in spaces.observation.items()}
    acted = model(obs)
    for agent, action in elite.act(obs, explore=False).items():
        np.testing.assert_allclose(acted[agent], action, atol=1e-6)
