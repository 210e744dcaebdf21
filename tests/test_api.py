"""The Python API: ``from distmarl import train, load_config`` trains a population and returns
its summary (here in process, ``local=True``: the API forwards to
:func:`distmarl.runtime.driver.trainer.train`, whose run on Ray tests/runtime/test_trainer.py checks);
``import distmarl`` alone imports no Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import distmarl
from distmarl import load_config, train
from distmarl.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"


def test_import_distmarl_imports_no_ray() -> None:
    code = ("import sys, distmarl; from distmarl import load_config, train; "
            "assert 'ray' not in sys.modules and 'mlflow' not in sys.modules, 'imported'; "
            "print(distmarl.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == distmarl.__version__


def test_load_config_is_the_config_packages() -> None:
    from distmarl.config import load_config as config_load_config

    assert load_config is config_load_config
    assert set(distmarl.__all__) == {"__version__", "load_config", "train"}
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        _ = distmarl.trian  # type: ignore[attr-defined]


def test_bad_input_is_refused_before_ray_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"buffer\.capacity"):
        train(TINY, ["buffer.capacity=-3"], show_progress=False)
    with pytest.raises(ValueError, match="overrides apply to a config path"):
        train(load_config(TINY), ["population.size=3"], show_progress=False)


@pytest.mark.slow
def test_train_returns_the_population_and_run_dir(tmp_path: Path) -> None:
    """``distmarl.train(cfg, local=True)`` trains the whole population in this process (no Ray
    address in the summary) and returns the summary it writes to the run directory."""
    cfg = load_config(TINY, [f"tracking.directory={tmp_path}", "tracking.mlflow=false"])
    summary = train(cfg, show_progress=False, run_dir=tmp_path / "run", local=True)
    assert summary["ray"] is None  # in process: no Ray cluster
    size, max_steps = cfg.population.size, cfg.training.max_steps_per_member
    assert summary["stop_reason"] == "max_steps"
    assert Path(summary["run_dir"]) == tmp_path / "run"
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["members"] == json.loads(json.dumps(summary["members"], default=str))
    assert summary["env_steps"] >= max_steps * size
    members = summary["members"]
    assert len(members) == size == 2
    bounds = cfg.evolution.hp_config
    for m in members:
        assert {"lr_actor", "batch_size", "learn_step"} <= set(m["hp"]), m["hp"]
        assert bounds["lr_actor"].min <= m["hp"]["lr_actor"] <= bounds["lr_actor"].max
        assert bounds["batch_size"].min <= m["hp"]["batch_size"] <= bounds["batch_size"].max
        assert len(m["fitness"]) == summary["generations"] == max_steps // cfg.evolution.evo_steps
        assert m["env_steps"] >= max_steps
    assert summary["best_fitness"] == max(m["fitness"][-1] for m in members)
