"""A node of the job tests' real two-node Ray cluster removed in the middle of a training (the
cluster's last use: see ``test_cluster_jobs.py``): the actors that ran there are restarted on
the node left, restored from snapshots that the coordinator keeps on its own node, and the run
completes with every counter only moving forward.

Removing the second node SIGKILLs every process of that node at once (raylet, object store,
agents, workers), as if the machine had gone. Placement is made deterministic with a
placeholder actor holding all 3 CPUs of the head while the run starts: the run's actors (0.5
CPU each: buffer, 2 learners, 2 workers) then all go to the second node, and the placeholder is
released right after that node is killed, so the head has room for all of them again. (The
coordinator, which needs no CPU, stays on its driver's node: the head.)
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from tests.jobs.raycluster import ROOT, LocalRayCluster

TINY = ROOT / "examples" / "configs" / "tiny.yaml"
#: one generation per member: 12,000 population steps, so that the kill (timed from when
#: every actor is up, by which time a fast machine has made a quarter of them) lands well
#: inside it. With half as many it landed past the middle on a fast machine, and the run could
#: end before Ray had seen every actor of the removed node restarted on the head.
MAX_STEPS = EVO_STEPS = 6000
#: the node is removed once training has run for this long and made this many env steps
#: (buffer snapshots every 0.5 s have been copied by then), before the generation's end.
#: Not covered: a node lost while the coordinator evaluates or copies members
#: (runtime/coordinator/generations.py retries only a worker that died, not weights or states whose owner,
#: a learner, died with the node).
KILL_AFTER_S, KILL_AT = 1.5, 300
PROGRESS = re.compile(r"([\d,]+) env steps .*? gen\s+(\d+)")

#: A second driver, for the test's view of the cluster: it holds the placeholder and answers
#: "actors" (JSON list) and "release" on stdin, one line each (its answers start with "@@ ";
#: Ray prints cluster events to the same stdout).
HELPER = textwrap.dedent("""
    import dataclasses, json, sys, time
    import ray
    from ray.util import state
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=sys.argv[1], log_to_driver=False)
    head = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("node:__internal_head__"))

    @ray.remote
    class Placeholder:
        def ready(self):
            return True

    holder = Placeholder.options(num_cpus=3, scheduling_strategy=NodeAffinitySchedulingStrategy(
        head, soft=False)).remote()
    ray.get(holder.ready.remote())
    print("@@", json.dumps({"head": head}), flush=True)
    for line in sys.stdin:
        if line.strip() == "actors":
            rows = state.list_actors(address=sys.argv[2], detail=True, limit=1000,
                                     raise_on_missing_output=False)
            print("@@", json.dumps([dataclasses.asdict(r) for r in rows], default=str), flush=True)
        elif line.strip() == "release":
            ray.kill(holder)
            while ray.available_resources().get("CPU", 0) < 3:
                time.sleep(0.1)
            print("@@", json.dumps({"released": True}), flush=True)
        else:
            break
""")


class Helper:
    """The helper driver as a subprocess; :meth:`ask` sends one command, returns its JSON
    (within ``REPLY_S``, else the test fails showing the helper's stderr and the live actors)."""

    REPLY_S = 120.0

    def __init__(self, cluster: LocalRayCluster) -> None:
        self.cluster = cluster
        self.errors = cluster.base / "helper.err"
        with self.errors.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", HELPER, cluster.gcs_address, cluster.address],
                env=cluster.env(), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True)
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.head = self._read()["head"]

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")  # its stdout closed: it exited

    def _read(self) -> object:
        deadline = time.monotonic() + self.REPLY_S
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no reply from the helper in {self.REPLY_S} s; alive actors "
                    f"{self.cluster.alive_actors()}; its stderr: "
                    f"{self.errors.read_text()[-3000:]}") from None
            assert line, f"the helper exited ({self.proc.poll()}): {self.errors.read_text()[-3000:]}"
            if line.startswith("@@ "):
                return json.loads(line[3:])

    def ask(self, command: str) -> object:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("exit\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Trainer:
    """`distmarl train --address` as a subprocess; its progress lines are parsed as they come."""

    def __init__(self, cluster: LocalRayCluster, out: Path) -> None:
        self.summary_path = out / "summary.json"
        self.stdout_path = out / "stdout.txt"
        args = [sys.executable, "-m", "distmarl.cli", "train", str(TINY),
                "--address", cluster.gcs_address, "--no-mlflow", "--run-dir", str(out / "run"),
                "--summary-json", str(self.summary_path),
                "--set", f"training.max_steps_per_member={MAX_STEPS}", "--set", f"evolution.evo_steps={EVO_STEPS}",
                "--set", "buffer.snapshot_interval_s=0.5", "--set", "evolution.final_episodes=2",
                "--set", "resources.num_cpus_per_learner=0.5",
                "--set", "resources.num_cpus_per_worker=0.5",
                "--set", "resources.num_cpus_buffer=0.5"]
        with self.stdout_path.open("w") as stdout:
            self.proc = subprocess.Popen(args, env=cluster.env(), cwd=ROOT, stdout=stdout,
                                         stderr=subprocess.PIPE, text=True)
        self.progress: list[tuple[int, int]] = []  # (env steps, generation), in order
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = ""
        while chunk := self.proc.stderr.read(256):
            buf += chunk
            *done, buf = re.split(r"[\r\n]", buf)
            for piece in done:
                self.stderr.append(piece)
                if match := PROGRESS.search(piece):
                    self.progress.append((int(match[1].replace(",", "")), int(match[2])))

    def wait_for_steps(self, steps: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self.progress and self.progress[-1][0] >= steps):
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, f"no {steps} env steps after {timeout_s} s"
            time.sleep(0.05)

    def finish(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=10)
        return code

    def log(self) -> str:
        return self.stdout_path.read_text()[-2000:] + "\n".join(self.stderr)[-6000:]


#: the actors Ray places on the node that is removed
AWAY = ["BufferShell", "HostShell", "HostShell", "RolloutShell", "RolloutShell"]


def every_actor_up(helper: Helper, trainer: Trainer, timeout_s: float
                   ) -> tuple[dict[str, dict], dict[str, dict]]:
    """The cluster's live actors and those on the node to be removed, once all of the run's
    are up and training has begun (asked of Ray itself: progress lines come a tenth of the
    run apart, too coarse to time the kill by)."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert trainer.proc.poll() is None, trainer.log()
        alive = {a["actor_id"]: a for a in helper.ask("actors") if a["state"] == "ALIVE"}
        away = {i: a for i, a in alive.items() if a["node_id"] != helper.head}
        if sorted(a["class_name"] for a in away.values()) == AWAY and trainer.progress:
            return alive, away
        assert time.monotonic() < deadline, f"not every actor up after {timeout_s} s: {alive}"
        time.sleep(0.1)


def check_node_loss(cluster: LocalRayCluster, tmp_path: Path) -> None:
    """A tiny run driven from this machine (``--address``) loses ``cluster``'s second node
    mid-run, and completes: see the module docstring. The head and the second node each have
    3 CPUs, nothing else runs on them."""
    helper = Helper(cluster)
    trainer = None
    try:
        trainer = Trainer(cluster, tmp_path)
        before, away = every_actor_up(helper, trainer, timeout_s=150)
        kinds = sorted(a["class_name"] for a in away.values())
        assert kinds == AWAY, before  # the coordinator stays with its driver
        time.sleep(KILL_AFTER_S)
        trainer.wait_for_steps(KILL_AT, timeout_s=60)  # learning, snapshots taken
        assert cluster.kill_node(1)
        steps_at_kill, generation_at_kill = trainer.progress[-1]
        helper.ask("release")  # the head's CPUs, for the actors Ray is restarting
        assert generation_at_kill == 0, "too late: the generation is over"
        code = trainer.finish(timeout_s=240)
        after = {a["actor_id"]: a for a in helper.ask("actors")}
    finally:
        helper.close()
        if trainer is not None and trainer.proc.poll() is None:
            trainer.proc.kill()
    assert code == 0, trainer.log() + cluster.logs()
    summary = json.loads(trainer.summary_path.read_text())

    # the run completed: every member used its steps, every generation was evaluated
    assert summary["stop_reason"] == "max_steps"
    assert all(m["env_steps"] >= MAX_STEPS for m in summary["members"])
    assert all(len(m["fitness"]) == summary["generations"] == MAX_STEPS // EVO_STEPS
               for m in summary["members"])
    assert all(m["updates"] > 0 for m in summary["members"])

    # every actor of the removed node came back on the head, once
    for actor_id in away:
        assert after[actor_id]["node_id"] == helper.head, after[actor_id]
        assert int(after[actor_id]["num_restarts"]) == 1, after[actor_id]

    # the summary says what was restarted and lost
    faults = summary["faults"]
    assert faults["learner_restarts"] == 2 and faults["buffer_restarts"] == 1, faults
    assert faults["worker_restarts"] == 2, faults
    assert faults["lost_env_steps"] == 2 * 8 * faults["lost_chunks"]  # chunk_steps * num_envs
    learners = [e for e in summary["events"] if e.get("fault") == "learner restarted"]
    assert sorted(e["member"] for e in learners) == [0, 1]
    assert all(e["restored"] for e in learners), learners  # from the coordinator's copies
    buffer = next(e for e in summary["events"] if e.get("fault") == "buffer restarted")
    assert buffer["restored_rows"] > 0 and buffer["lost_rows"] == faults["buffer_lost_rows"]

    # counters only moved forward, through the fault and to the end
    steps = [s for s, _ in trainer.progress]
    generations = [g for _, g in trainer.progress]
    assert steps == sorted(steps) and generations == sorted(generations)
    assert summary["env_steps"] >= max(steps) >= steps_at_kill
