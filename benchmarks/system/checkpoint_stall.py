"""How long a checkpoint holds training up, against another version of distmarl's (a worktree
of an earlier commit), and how fast checkpoints reach an S3 server.

Each run is a fresh process of one tree (``PYTHONPATH`` set to it), training a config in
process (``--local``: the coordinator's thread is the one a checkpoint holds up) with a
checkpoint every ``--every`` env steps per member; ``Recorder.checkpoint`` is timed around
each call (what training waits for: in a tree that writes checkpoints in the background,
taking the states and handing them over; otherwise the whole write). Prints, per config and
tree, the checkpoints taken, the mean seconds each held training, the mean interval between
them and the share of it held, and the checkpoint's size. With ``--s3`` this tree's run
also keeps its checkpoints on an S3 server started on 127.0.0.1 (moto's, the ``dev`` extra),
and the MB/s they were copied at is printed.

    .venv/bin/python -m benchmarks.system.checkpoint_stall --baseline WORKTREE
        [--configs main pistonball] [--s3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.micro.against import ROOT

#: each config: its file, overrides, env steps per member and between checkpoints
CONFIGS: dict[str, tuple[str, list[str], int, int]] = {
    "main": ("speaker_listener_maddpg.yaml", [], 20_000, 2_000),
    "pistonball": ("pistonball_ippo.yaml", ["evolution.evo_steps=512",
                                            "evolution.final_episodes=1"], 1_024, 256),
}

#: one run in the tree at ``argv[1]``: one JSON line
PROBE = """
import json, sys, tempfile, time
from pathlib import Path
from distmarl.config import load_config
from distmarl.runtime.driver.trainer import train
from distmarl.runtime.records import recorder
tree, config, steps, every, storage = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), \\
    int(sys.argv[4]), sys.argv[5]
held = []
original = recorder.Recorder.checkpoint
def timed(self):
    began = time.perf_counter()
    try:
        return original(self)
    finally:
        held.append(time.perf_counter() - began)
recorder.Recorder.checkpoint = timed
with tempfile.TemporaryDirectory() as tmp:
    sets = [f"tracking.directory={tmp}", "tracking.mlflow=false", "tracking.videos=false",
            f"training.max_steps_per_member={steps}", f"tracking.checkpoint_interval={every}",
            *json.loads(sys.argv[6])]
    if storage:
        sets.append(f"tracking.storage={storage}")
    cfg = load_config(tree / "examples/configs" / config, sets)
    s = train(cfg, run_dir=Path(tmp) / "run", show_progress=False, local=True)
    ckpt = Path(s["checkpoint"])
    size = sum(p.stat().st_size for p in ckpt.iterdir())
    print(json.dumps({"held": held, "wall_seconds": s["wall_seconds"], "bytes": size,
                      "checkpoints": s.get("checkpoints")}))
"""


def run(tree: Path, config: str, sets: list[str], steps: int, every: int,
        storage: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    """One run of ``config`` in ``tree``; what its checkpoints held."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(tree), config, str(steps),
                          str(every), storage, json.dumps(sets)],
                         capture_output=True, text=True, check=True, cwd=tree,
                         env={**os.environ, "PYTHONPATH": str(tree), **(env or {})})
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def line(name: str, tree: str, f: dict[str, Any]) -> str:
    """The per-run line: checkpoints, seconds held each, the interval and share held."""
    held = f["held"][:-1] or f["held"]  # the last is the run's end, not an interval's
    interval = f["wall_seconds"] / max(1, len(f["held"]))
    mean = sum(held) / len(held)
    return (f"{name:<11} {tree:<9} {len(f['held']):>3} checkpoints of {f['bytes'] / 1e6:,.1f} MB: "
            f"training held {mean:.3f} s each, every {interval:.1f} s ({mean / interval:.1%})")


def s3_server() -> tuple[subprocess.Popen, dict[str, str], str]:
    """moto's S3 server on a free port with a bucket; its process, the environment that
    reaches it and the storage URI."""
    from pyarrow import fs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H",
                             "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}
    os.environ.update(env)
    fs.S3FileSystem(endpoint_override=endpoint, allow_bucket_creation=True).create_dir("bench")
    return proc, env, "s3://bench/runs"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a worktree of another commit")
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--s3", action="store_true", help="this tree's runs keep their checkpoints "
                   "on a local S3 server too")
    args = p.parse_args(argv)
    server = None
    storage, env = "", {}
    if args.s3:
        server, env, storage = s3_server()
    try:
        for name in args.configs:
            config, sets, steps, every = CONFIGS[name]
            print(line(name, "baseline", run(args.baseline.resolve(), config, sets, steps,
                                             every)), flush=True)
            f = run(ROOT, config, sets, steps, every, storage, env)
            print(line(name, "this tree", f), flush=True)
            c = f.get("checkpoints") or {}
            if storage and c.get("store_s"):
                print(f"{'':<11} stored {c['stored']} checkpoints at "
                      f"{c['stored_bytes'] / c['store_s'] / 1e6:,.1f} MB/s to the S3 server "
                      f"({c['superseded']} superseded, {len(c['failed'])} failed)", flush=True)
    finally:
        if server is not None:
            server.kill()


if __name__ == "__main__":
    main()
