"""Where a run lands in MLflow: the experiment is the config's ``name`` (or
``tracking.experiment_name``), each training run a parent run in it named as its run directory
(``<time>-<name>``), its members child runs; two runs of one config sit side by side. A real
sqlite store."""

from __future__ import annotations

import re
from pathlib import Path

from distmarl.config import load_config
from distmarl.runtime.driver.trainer import new_run_dir
from distmarl.tracking.mlflow import make_tracker

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"


def start_run(tmp_path: Path, *sets: str) -> dict:
    cfg = load_config(TINY, [f"tracking.mlflow_uri=sqlite:///{tmp_path / 'mlflow.db'}", *sets])
    run_dir = new_run_dir(tmp_path / "runs", cfg.name)
    tracker = make_tracker(cfg.tracking, cfg.name, run_dir)
    ids = tracker.start({"name": cfg.name}, {"algorithm": cfg.algorithm.name},
                        [{"lr": 0.1}, {"lr": 0.2}])
    tracker.finish()
    return {**ids, "run_dir": run_dir}


def test_experiment_is_the_config_name_and_each_run_a_parent(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    first = start_run(tmp_path, "name=speaker_listener_maddpg")
    second = start_run(tmp_path, "name=speaker_listener_maddpg")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("speaker_listener_maddpg")
    assert exp is not None and first["experiment"] == "speaker_listener_maddpg"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 6  # two parents, two members each, in one experiment
    for ids in (first, second):
        parent = client.get_run(ids["parent"])
        assert re.fullmatch(r"\d{8}-\d{6}-speaker_listener_maddpg(-2)?", parent.info.run_name)
        assert parent.info.run_name == ids["run_dir"].name  # -2: the same second's second
        for member, run_id in enumerate(ids["members"]):
            child = client.get_run(run_id)
            assert child.data.tags["mlflow.parentRunId"] == ids["parent"]
            assert child.info.run_name == f"member-{member}"
    assert first["parent"] != second["parent"]


def test_experiment_name_overrides(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    ids = start_run(tmp_path, "name=spread", "tracking.experiment_name=shared")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert ids["experiment"] == "shared" and client.get_experiment_by_name("spread") is None
    parent = client.get_run(ids["parent"])
    assert parent.info.experiment_id == client.get_experiment_by_name("shared").experiment_id
    assert parent.info.run_name == ids["run_dir"].name
    assert re.fullmatch(r"\d{8}-\d{6}-spread", parent.info.run_name)


def test_tracking_off_is_a_null_tracker(tmp_path: Path) -> None:
    cfg = load_config(TINY, ["tracking.mlflow=false"])
    tracker = make_tracker(cfg.tracking, cfg.name, tmp_path / "run")
    assert tracker.run_ids() == {} and tracker.log_model(None, "m", [], {}) is None
    assert not (tmp_path / "run").exists()


def test_a_table_reaches_the_parent_run_as_an_mlflow_table(tmp_path: Path) -> None:
    import json

    from mlflow.tracking import MlflowClient

    cfg = load_config(TINY, [f"tracking.mlflow_uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    tracker = make_tracker(cfg.tracking, cfg.name, new_run_dir(tmp_path / "runs", cfg.name))
    ids = tracker.start({"name": cfg.name}, {}, [{"lr": 0.1}])
    tracker.log_table({"player": ["member/0", "ref/random"], "rating": [3.5, 0.0]},
                      "league/ratings.json")
    assert tracker.flush()
    tracker.finish()
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    table = json.loads(Path(client.download_artifacts(ids["parent"],
                                                      "league/ratings.json")).read_text())
    assert table["columns"] == ["player", "rating"]
    assert table["data"] == [["member/0", 3.5], ["ref/random", 0.0]]
    logged = json.loads(client.get_run(ids["parent"]).data.tags["mlflow.loggedArtifacts"])
    assert {"path": "league/ratings.json", "type": "table"} in logged


def test_logging_the_elite_model_leaves_out_mlflow_s_pickle_notice(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """MLflow logs a notice on every pickled model (the README says to load it from a server
    you trust); distmarl's log_model drops it, and only it. The control logs a model with
    MLflow directly and sees the notice, so the test fails if the wording changes."""
    import logging

    import mlflow
    import torch

    from distmarl.tracking.mlflow import PICKLE_NOTICE

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Collect()
    logger = logging.getLogger("mlflow.pytorch")
    logger.addHandler(handler)
    try:
        cfg = load_config(TINY, [f"tracking.mlflow_uri=sqlite:///{tmp_path / 'mlflow.db'}"])
        tracker = make_tracker(cfg.tracking, cfg.name, new_run_dir(tmp_path / "runs", cfg.name))
        tracker.start({"name": cfg.name}, {}, [{"lr": 0.1}])
        uri = tracker.log_model(torch.nn.Linear(2, 1), "elite", ["torch"], {})
        tracker.finish()
        assert uri is not None and not any(m.startswith(PICKLE_NOTICE) for m in seen)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'control.db'}")
        control = mlflow.create_experiment("control", (tmp_path / "artifacts").as_uri())
        with mlflow.start_run(experiment_id=control):
            mlflow.pytorch.log_model(torch.nn.Linear(2, 1), name="control",
                                     serialization_format="pickle",
                                     pip_requirements=["torch"])
        assert any(m.startswith(PICKLE_NOTICE) for m in seen)
    finally:
        logger.removeHandler(handler)
