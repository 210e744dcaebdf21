"""`distmarl submit` / `distmarl jobs` against a real two-node Ray cluster on this machine, and
last, a node of that cluster lost mid-run (``node_loss.py``).

One tiny training job is shared by the assertions on its outcome (a job costs ~30-70 s here,
most of it process start-up); a job that fails and a sweep job run beside it, one that is
stopped follows.
The cluster has token authentication on; the clients find its token in each place Ray looks
(``token=`` of ``run_cli``), or nowhere.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jobs.conftest import run_cli, run_clis
from tests.jobs.node_loss import check_node_loss
from tests.jobs.raycluster import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TINY = ROOT / "examples" / "configs" / "tiny.yaml"
SECRET = "pw-d0-not-print-7f3a"
SUMMARY = re.compile(r"^distmarl: max_steps after ([\d,]+) env steps .* run in (\S+)$", re.M)


class BackgroundJob:
    """``distmarl submit ARGS`` in a subprocess, started when first needed (beside the tiny
    job) and followed to its end."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self, cluster) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "distmarl.cli", "submit", *self.args,
                 "--address", cluster.address],
                env=cluster.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)

    def result(self, cluster, timeout: float = 180) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr (started now if the tiny job did not start it)."""
        self.start(cluster)
        assert self.proc is not None
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.returncode, out, err

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture(scope="module")
def bad_env_job() -> Iterator[BackgroundJob]:
    """A job whose env spec passes local validation (a string) but does not exist on the
    cluster: its entrypoint fails before asking Ray for any actor."""
    job = BackgroundJob(str(TINY), "--set", "env.spec=no_such_env_pkg_zz:env",
                        "--set", "tracking.mlflow=false", "--submission-id", "bad-env-job")
    yield job
    job.close()


@pytest.fixture(scope="module")
def sweep_job(tmp_path_factory) -> Iterator[tuple[BackgroundJob, Path]]:
    """``submit --sweep`` of tiny.yaml x 2 seeds into a folder of its own: each run asks for
    1 CPU of the cluster's 6, so both start at once (they wait for the tiny job's actors to
    leave room)."""
    out = tmp_path_factory.mktemp("sweep-job") / "sweep"
    job = BackgroundJob(str(TINY), "--sweep", "--seeds", "0-1", "--out", str(out),
                        "--set", "training.max_steps_per_member=200",
                        "--set", "evolution.evo_steps=100", "--set", "tracking.mlflow=false",
                        "--set", "tracking.videos=false", "--submission-id", "sweep-job-test")
    yield job, out
    job.close()


@pytest.fixture(scope="module")
def tiny_job(cluster, bad_env_job, sweep_job, tmp_path_factory):
    """`distmarl submit` of tiny.yaml, its MLflow store in tmp given through --set, each member's
    learner and rollout worker in one process (colocated) asking 1.5 + 1.5 CPU: the two fill
    the cluster's 6 CPUs, 3 per node, so they must spread across both nodes. The token is only
    in Ray's default file ($HOME/.ray/auth_token) and RAY_AUTH_MODE is unset, as on a machine
    where a local `ray.init` or `ray get-auth-token --generate` wrote it."""
    tmp = tmp_path_factory.mktemp("tiny-job")
    bad_env_job.start(cluster)  # meanwhile: it fails in its entrypoint, asking Ray for nothing
    sweep_job[0].start(cluster)  # and the sweep's runs wait for room
    db = tmp / "mlflow.db"
    uri = f"sqlite:///{db}"
    proc = run_cli(cluster, "submit", str(TINY), "--address", cluster.address,
                   "--set", f"tracking.mlflow_uri={uri}",
                   "--set", "training.max_steps_per_member=400",
                   "--set", "resources.num_cpus_per_learner=1.5",
                   "--set", "resources.num_cpus_per_worker=1.5",
                   "--set", "resources.colocate=true",
                   "--submission-id", "tiny-job-test",
                   env={"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": SECRET},
                   timeout=300, token="home")
    return {"proc": proc, "uri": uri, "db": db, "id": "tiny-job-test"}


def test_submit_follows_the_job_to_success(tiny_job, cluster) -> None:
    proc = tiny_job["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:] + cluster.logs()
    assert "distmarl: job tiny-job-test SUCCEEDED" in proc.stderr
    # the followed logs end with the trainer's summary line: 2 members x 400 steps (+ a chunk)
    steps, run_dir = SUMMARY.search(proc.stdout).groups()
    assert 800 <= int(steps.replace(",", "")) < 800 + 2 * 2 * 8 * 2
    # the run is kept outside the job's upload (Ray's cache): in ~/distmarl-runs on the head,
    # said before the job was sent, and found there afterwards
    assert "run directory: ~/distmarl-runs/<run> on the head; tracking.directory 'runs' " \
        "would be inside the job's working-dir upload, which Ray deletes" in proc.stderr
    assert "/runtime_resources/working_dir_files/" not in run_dir
    assert Path(run_dir).parent.name == "distmarl-runs"
    assert json.loads((Path(run_dir) / "summary.json").read_text())["stop_reason"] == "max_steps"


def test_job_status_and_logs_through_the_cli(tiny_job, cluster) -> None:
    """Each finds the token in another place: Ray's default file, RAY_AUTH_TOKEN, and
    RAY_AUTH_MODE=token with RAY_AUTH_TOKEN_PATH."""
    status, logs, listed = run_clis(
        cluster,
        (("jobs", "status", "tiny-job-test", "--json", "--address", cluster.address),
         {"token": "home"}),
        (("jobs", "logs", "tiny-job-test", "--address", cluster.address), {"token": "env"}),
        (("jobs", "list", "--address", cluster.address), {}))
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["status"] == "SUCCEEDED"
    assert info["entrypoint"] == "python -m distmarl.cli train _distmarl_job.yaml --quiet"
    assert info["metadata"]["distmarl.name"] == "tiny"
    assert info["runtime_env"]["env_vars"] == {"MLFLOW_TRACKING_URI": "<hidden>",
                                               "MLFLOW_TRACKING_USERNAME": "<hidden>",
                                               "MLFLOW_TRACKING_PASSWORD": "<hidden>"}
    assert logs.returncode == 0 and SUMMARY.search(logs.stdout), logs.stdout[-2000:]
    row = next(line for line in listed.stdout.splitlines() if line.startswith("tiny-job-test"))
    assert row.split()[1] == "SUCCEEDED"


def test_mlflow_run_logged_through_the_env_var_only(tiny_job) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tiny_job["uri"])
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    # the experiment is the config's name; the parent run is named by its start time and it
    assert [client.get_experiment(p.info.experiment_id).name for p in parents] == ["tiny"]
    assert len(parents) == 1 and re.fullmatch(r"\d{8}-\d{6}-tiny", parents[0].info.run_name)
    assert sorted(c.info.run_name for c in children) == ["member-0", "member-1"]
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["training.max_steps_per_member"] == "400"
    # the URI reached the run as MLFLOW_TRACKING_URI, not through the config / params
    assert parent.data.params["tracking.mlflow_uri"] == "None"
    assert not any(tiny_job["uri"] in v or SECRET in v for v in parent.data.params.values())
    assert "population/best_fitness" in parent.data.metrics


def test_credentials_are_never_printed_or_shipped(tiny_job, cluster) -> None:
    proc = tiny_job["proc"]
    for text in (proc.stdout, proc.stderr):
        assert SECRET not in text and tiny_job["uri"] not in text
    assert "MLFLOW_TRACKING_PASSWORD from this shell's environment" in proc.stderr
    status = run_cli(cluster, "jobs", "status", "tiny-job-test", "--address", cluster.address)
    assert SECRET not in status.stdout and "<hidden>" in status.stdout
    # the config as shipped, in the job's working dir that Ray unpacked on the head
    # (on each node that unpacked it)
    [shipped] = {p.read_text() for p in cluster.base.rglob("working_dir_files/*/_distmarl_job.yaml")
                 if "max_steps_per_member: 400" in p.read_text()}  # the --set overrides travel
    assert "mlflow_uri: null" in shipped and tiny_job["uri"] not in shipped


def test_actors_spread_across_both_nodes(tiny_job, cluster) -> None:
    assert tiny_job["proc"].returncode == 0
    job_id = json.loads(run_cli(cluster, "jobs", "status", "tiny-job-test", "--json",
                                "--address", cluster.address).stdout)["job_id"]
    nodes = {n["node_id"] for n in json.loads(cluster.state("nodes")) if n["state"] == "ALIVE"}
    assert len(nodes) == 2
    actors = [a for a in json.loads(cluster.state("actors")) if a["job_id"] == job_id]
    by_class: dict[str, set[str]] = {}
    for a in actors:
        by_class.setdefault(a["class_name"], set()).add(a["node_id"])
    assert set(by_class) == {"Coordinator", "BufferShell", "HostShell"}
    assert sum(1 for a in actors if a["class_name"] == "HostShell") == 2
    assert by_class["HostShell"] == nodes


def test_job_that_fails_on_the_cluster_reports_failed(bad_env_job, cluster) -> None:
    """The env spec passes local validation (a string) but does not exist on the cluster."""
    code, _, err = bad_env_job.result(cluster)
    assert code == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("distmarl: job bad-env-job FAILED: Job entrypoint command failed "
                           "with exit code 2"), last
    assert "env.spec 'no_such_env_pkg_zz:env'" in last and "no_such_env_pkg_zz" in last
    status = run_cli(cluster, "jobs", "status", "bad-env-job", "--json", "--address", cluster.address)
    assert json.loads(status.stdout)["status"] == "FAILED"


def test_a_sweep_job_runs_its_runs_side_by_side_then_reports(sweep_job, cluster) -> None:
    job, out = sweep_job
    code, stdout, err = job.result(cluster, timeout=400)
    assert code == 0, err[-3000:] + stdout[-3000:]
    assert "sweep folder: " + str(out) in err
    lines = [ln for ln in stdout.splitlines() if ln.startswith("distmarl: sweep: ")]
    # both runs started before either ended
    assert [ln.split()[2] for ln in lines] == ["started", "started", "finished", "finished"]
    assert "| base | 2 | 0, 1 |" in stdout
    assert (out / "report" / "report.md").exists()
    assert {json.loads(p.read_text())["stop_reason"]
            for p in out.glob("base/seed-*/summary.json")} == {"max_steps"}


def test_stopping_a_followed_job_makes_submit_exit_3(cluster) -> None:
    submit = subprocess.Popen(
        [sys.executable, "-m", "distmarl.cli", "submit", str(TINY), "--address", cluster.address,
         "--set", "training.max_steps_per_member=1000000", "--set", "tracking.mlflow=false",
         "--submission-id", "long-job"],
        env=cluster.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # stopped once its run holds actors: a job stopped before its driver has started
        # may leave that driver to start after the stop (Ray ends the processes it finds)
        deadline = time.monotonic() + 120
        while cluster.job_status("long-job") is None or not cluster.alive_actors():
            assert time.monotonic() < deadline and submit.poll() is None, submit.communicate()
            time.sleep(0.5)
        stop = run_cli(cluster, "jobs", "stop", "long-job", "--wait", "--address", cluster.address)
        assert stop.returncode == 0 and "now STOPPED" in stop.stdout, stop.stdout + stop.stderr
        _, err = submit.communicate(timeout=60)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 3, err[-2000:]
    assert "distmarl: job long-job STOPPED" in err.strip().splitlines()[-1]
    again = run_cli(cluster, "jobs", "stop", "long-job", "--address", cluster.address)
    assert again.returncode == 0 and "already STOPPED, nothing to stop" in again.stdout
    left = cluster.wait_for_no_actors(timeout_s=60)  # a stopped job frees what it held
    assert not left, (f"actors still alive a minute after the stop: {left}; jobs: "
                      + run_cli(cluster, "jobs", "list", "--address", cluster.address).stdout)


def test_unknown_job_id_exits_4(cluster) -> None:
    proc = run_cli(cluster, "jobs", "status", "no-such-job", "--address", cluster.address)
    assert proc.returncode == 4
    assert "no-such-job" in proc.stderr and "does not exist" in proc.stderr


def test_a_missing_or_wrong_token_exits_4_naming_what_to_set(cluster) -> None:
    """Nothing is sent without the token; the one stderr line says which variables and which
    file to put it in, without a traceback."""
    default_file = f"{cluster.base}/empty-home/.ray/auth_token"
    none = {"token": "none", "timeout": 60}
    *missing, wrong, disabled = run_clis(
        cluster,
        (("submit", str(TINY), "--no-mlflow-env", "--submission-id", "never-sent",
          "--address", cluster.address), none),
        (("jobs", "list", "--address", cluster.address), none),
        (("jobs", "list", "--address", cluster.address),
         {**none, "env": {"RAY_AUTH_TOKEN": "not-the-token"}}),
        (("jobs", "list", "--address", cluster.address),
         {"token": "home", "env": {"RAY_AUTH_MODE": "disabled"}, "timeout": 60}))
    for proc in missing:
        assert proc.returncode == 4, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"distmarl: Ray job server {cluster.address} requires a token and none was found. "
            "Put the cluster's token (`ray get-auth-token` on its head prints it) in "
            f"RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH, or in {default_file}."]
    assert wrong.returncode == 4 and "Traceback" not in wrong.stderr
    assert f"{cluster.address} refused the token from RAY_AUTH_TOKEN. Put" in wrong.stderr
    assert "not-the-token" not in wrong.stderr
    assert disabled.returncode == 4 and "Traceback" not in disabled.stderr
    assert disabled.stderr.strip().endswith(", and set RAY_AUTH_MODE=token (or unset it).")
    listed = run_cli(cluster, "jobs", "list", "--address", cluster.address)
    assert listed.returncode == 0 and "never-sent" not in listed.stdout


def test_removing_a_node_mid_run_restarts_its_actors_on_the_other(cluster, tmp_path) -> None:
    """Last in this file: it removes the cluster's second node (``node_loss.py``)."""
    check_node_loss(cluster, tmp_path)
