"""``distmarl sweep``: grid points x seeds, each a ``distmarl train`` process, two at a time;
stopped by SIGTERM (exit 143) and resumed by the same command, which skips the finished runs,
resumes the interrupted ones and ends with the report, in one MLflow run holding the training
runs; which runs start on a cluster; bad arguments refused before anything runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from distmarl.studies.plan import SweepPlan, claim, parse_seeds
from distmarl.studies.schedule import Need, Room, check_fits

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
SHORT = ["tracking.videos=false", "training.max_steps_per_member=300", "tracking.tags={team: a}",
         "evolution.evo_steps=100", "evolution.final_episodes=2",
         "tracking.checkpoint_interval=50"]
GRID = "replay.replay_ratio=0.25,0.75"


def sweep(out: Path) -> subprocess.Popen:
    sets = [a for s in SHORT for a in ("--set", s)]
    return subprocess.Popen([sys.executable, "-m", "distmarl", "sweep", str(TINY),
                             "--seeds", "0-2", "--grid", GRID, *sets, "--out", str(out),
                             "--local", "--parallel", "2"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summaries(out: Path) -> dict[str, dict]:
    return {f"{p.parent.parent.name}/{p.parent.name}": json.loads(p.read_text())
            for p in out.glob("*/seed-*/summary.json")}


@pytest.mark.slow
def test_a_sweep_stopped_by_sigterm_resumes_where_it_stopped(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = sweep(out)
    deadline = time.monotonic() + 300
    # stopped once the first two runs have finished and a later one has its first checkpoint
    while time.monotonic() < deadline and not (
            len(summaries(out)) >= 2 and any(not (d / "summary.json").exists()
                                             for d in out.glob("*/seed-*")
                                             if list(d.glob("checkpoints/step-*")))):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "the same command resumes it" in err
    before = summaries(out)
    done = {k for k, v in before.items() if v["stop_reason"] == "max_steps"}
    stopped = {k for k, v in before.items() if v["stop_reason"] == "stopped by SIGTERM"}
    assert done and stopped and len(before) <= 4
    mtimes = {k: (out / k / "summary.json").stat().st_mtime for k in done}

    again = sweep(out)
    stdout, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    after = summaries(out)
    assert len(after) == 6 and all(s["stop_reason"] == "max_steps" for s in after.values())
    assert {k: (out / k / "summary.json").stat().st_mtime for k in done} == mtimes  # kept
    assert all(after[k]["resumed_from"] for k in stopped)
    for arm in ("replay.replay_ratio=0.25", "replay.replay_ratio=0.75"):
        assert f"| {arm} | 3 | 0, 1, 2 |" in stdout
    assert "distmarl: 6 runs in" in stdout
    assert (out / "report" / "curves.png").exists()
    check_sweep_mlflow(out)


def check_sweep_mlflow(out: Path) -> None:
    """One sweep run, FINISHED, holding the report; each training run nested under it once
    (a resumed one goes on in its run), tagged with its arm, its seed a parameter."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    top = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(top) == 1 and top[0].info.status == "FINISHED"
    sweep_id = top[0].info.run_id
    assert [a.path for a in client.list_artifacts(sweep_id, "report")] == [
        "report/curves.png", "report/profile.png", "report/report.json", "report/report.md"]
    assert "arm/replay.replay_ratio_0.25/iqm" in top[0].data.metrics
    assert top[0].data.params["sweep.config"] == str(TINY.resolve())
    plan = client.download_artifacts(sweep_id, "sweep.json", str(out / "fetched"))
    assert json.loads(Path(plan).read_text())["seeds"] == [0, 1, 2]
    training = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == sweep_id]
    assert sorted((r.data.tags["distmarl.arm"], r.data.params["seed"]) for r in training) == [
        (f"replay.replay_ratio={v}", str(s)) for v in (0.25, 0.75) for s in range(3)]
    assert all(r.info.status == "FINISHED" and r.data.tags["team"] == "a" for r in training)


def test_runs_start_as_the_cluster_has_room() -> None:
    cfg = load_config(TINY)  # 2 members: a learner and a worker each at 0.25 CPU
    assert Need.of(cfg, cluster_gpus=0) == Need(1.0)
    room = Room.of({"CPU": 10.0})
    runs = [(f"r{i}", Need(4.0)) for i in range(4)]
    assert room.start(runs, running=0, cap=None) == ["r0", "r1"]  # 2 CPUs left
    assert room.start(runs[2:], running=2, cap=None) == []
    room.free(Need(4.0))
    assert room.start(runs[2:], running=1, cap=None) == ["r2"]
    assert room.start(runs[3:], running=2, cap=2) == []  # --parallel 2
    big = Room.of({"CPU": 2.0})  # a run larger than the cluster shrinks to fit, alone
    assert big.start(runs, running=0, cap=None) == ["r0"]
    gpu = load_config(TINY, ["resources.num_gpus_per_learner=1",
                             "population.members_per_learner=1"])
    assert Need.of(gpu, cluster_gpus=1) == Need(1.0, 2.0)
    assert Need.of(gpu, cluster_gpus=0) == Need(1.0)  # no GPU asked where there is none
    with pytest.raises(ConfigError, match=r"sweep run a/seed-0: .* 2 GPUs .* the cluster has 1"):
        check_fits({"a/seed-0": Need(4.0, 2.0)}, {"CPU": 8.0, "GPU": 1.0})


def test_bad_sweep_arguments_are_refused_before_anything_runs(tmp_path: Path) -> None:
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    for bad in ("0-x", "3,3", ""):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    with pytest.raises(ConfigError, match=r"--grid point: arm training\.no_such_key=1"):
        SweepPlan.parse(TINY, "0", ["training.no_such_key=1,2"], [])
    with pytest.raises(ConfigError, match="--grid"):
        SweepPlan.parse(TINY, "0", ["replay.replay_ratio"], [])
    with pytest.raises(ConfigError, match=r"(?s)--arm: arm fast: .*no_such_key"):
        SweepPlan.parse(TINY, "0", arms=[["fast", "training.no_such_key=1"]])
    with pytest.raises(ConfigError, match="--arm fast lr: write NAME KEY=VALUE"):
        SweepPlan.parse(TINY, "0", arms=[["fast", "lr"]])
    with pytest.raises(ConfigError, match="the name first, without '='"):
        SweepPlan.parse(TINY, "0", arms=[["replay.replay_ratio=0.5"]])
    with pytest.raises(ConfigError, match=r"^invalid config (?s:.*)training\.nope"):  # not an arm
        SweepPlan.parse(TINY, "0", sets=["training.nope=1"])
    with pytest.raises(ConfigError, match="--grid and --arm"):
        SweepPlan.parse(TINY, "0", [GRID], arms=[["fast"]])
    with pytest.raises(ConfigError, match="arm 'a/b': not a folder name"):
        SweepPlan.of(TINY, [0], {"a/b": []})
    plan = SweepPlan.parse(TINY, "0-1", ["replay.replay_ratio=0.25,0.75"], [])
    assert list(plan.arms) == ["replay.replay_ratio=0.25", "replay.replay_ratio=0.75"]
    # seed by seed: a sweep stopped part way has its arms paired on the seeds it finished
    assert [r.name for r in plan.runs(tmp_path)] == [
        "replay.replay_ratio=0.25/seed-0", "replay.replay_ratio=0.75/seed-0",
        "replay.replay_ratio=0.25/seed-1", "replay.replay_ratio=0.75/seed-1"]
    claim(tmp_path / "a", plan)
    assert claim(tmp_path / "a", plan) == plan  # the same sweep: resumed
    copy = tmp_path / "job" / "_distmarl_job.yaml"  # a Ray job's copy of the same file
    copy.parent.mkdir()
    copy.write_bytes(TINY.read_bytes())
    assert claim(tmp_path / "a", SweepPlan.parse(copy, "0-1", [GRID])).arms == plan.arms
    with pytest.raises(ConfigError, match="holds another sweep's runs"):
        claim(tmp_path / "a", SweepPlan.parse(TINY, "0-2", [], ["training.max_steps_per_member=64"]))
    with pytest.raises(ConfigError, match=r"holds arm replay.replay_ratio=0.25 run with "
                                          r"\['replay.replay_ratio=0.25'\], not \[\]"):
        claim(tmp_path / "a", SweepPlan.of(TINY, [0], {"replay.replay_ratio=0.25": []}))
    # more seeds and a new arm extend the sweep; the folder's plan holds all of it
    more = claim(tmp_path / "a", SweepPlan.parse(TINY, "1-2", arms=[["plain"]]))
    assert list(more.arms) == [*plan.arms, "plain"] and more.seeds == (0, 1, 2)
    assert SweepPlan.from_json(json.loads((tmp_path / "a" / "sweep.json").read_text())) == more
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty and holds no sweep"):
        claim(tmp_path / "b", plan)


def test_bad_sweep_jobs_are_refused_before_anything_is_sent(capsys) -> None:
    from distmarl.cli import main
    from distmarl.job_request import prepare_submission

    for args, message in [
            (["--grid", GRID], "--grid: only with --sweep"),
            (["--arm", "x"], "--arm: only with --sweep"),
            (["--sweep", "--seeds", "0", "--arm", "x", "nope"], "--arm x nope: write NAME"),
            (["--sweep"], "--sweep needs --seeds"),
            (["--sweep", "--seeds", "0-1", "--out", "rel"], "--out rel: give the sweep's "
             "folder on the head as an absolute path"),
            (["--sweep", "--seeds", "0-1", "--grid", "training.nope=1"], "--grid point")]:
        assert main(["submit", str(TINY), *args, "--address", "http://127.0.0.1:9"]) == 2
        assert message in capsys.readouterr().err
    assert main(["sweep", str(TINY), "--seeds", "0", "--parallel", "0"]) == 2
    assert "--parallel 0: at least 1" in capsys.readouterr().err
    job = prepare_submission(TINY, sweep=["--seeds", "0-1", "--grid", GRID], environ={})
    assert job.entrypoint == ("python -m distmarl.cli sweep _distmarl_job.yaml --seeds 0-1 "
                              f"--grid {GRID} --out '~/distmarl-runs/sweeps/tiny'")
    assert job.keeping == ["sweep folder: ~/distmarl-runs/sweeps/tiny on the head"]
