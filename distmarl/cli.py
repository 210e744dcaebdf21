"""``distmarl`` command line: train, evaluate, play, export, check-env, submit, jobs, config
show, buffer-info."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from distmarl.version import __version__

#: ``distmarl.export.FORMATS``, named here so that building the parser (every command, ``jobs``
#: and ``submit`` included) imports no torch
EXPORT_FORMATS = ("torchscript", "onnx")


def _buffer_info(args: argparse.Namespace) -> int:
    from distmarl.buffers import MultiAgentReplayBuffer
    from distmarl.buffers.shards import merge_stats
    from distmarl.checkpoint import resolve, stored_buffer_files
    from distmarl.storage import is_remote

    path = Path(args.path)
    if not is_remote(args.path) and not path.exists():
        print(f"distmarl: buffer file {path} does not exist", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if is_remote(args.path):
            path = stack.enter_context(_checkpoint_at(args.path))
        files = stored_buffer_files(resolve(path)) if path.is_dir() else [path]
        if not files:
            print(f"distmarl: checkpoint {args.path} holds no buffer (on-policy runs keep "
                  "none)", file=sys.stderr)
            return 2
        buffers = [MultiAgentReplayBuffer.load(f) for f in files]
    info = merge_stats([b.stats() for b in buffers])
    print(json.dumps({**info, "config": buffers[0].config()}, indent=2))
    return 0


@contextlib.contextmanager
def _checkpoint_at(value: str) -> Iterator[Path]:
    """The checkpoint ``value`` names as a local path: a local one as it is (it must exist),
    one on an object store (``s3://...``) copied to a temporary folder first."""
    from distmarl.storage import fetched_checkpoint, is_remote

    if not is_remote(value):
        yield _existing(value, "checkpoint")
        return
    with tempfile.TemporaryDirectory(prefix="distmarl-checkpoint-") as tmp:
        yield fetched_checkpoint(value, Path(tmp))


def _existing(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {p} does not exist")
    return p


def show_layouts() -> None:
    """Print how each agent group's images are read (a line per group, from the algorithms'
    build in preflight), so a board read the wrong way round is seen before training."""
    logger = logging.getLogger("distmarl.algorithms.common.observations")
    for old in logger.handlers:
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("distmarl: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


#: ``train``'s exit status when the local Ray did not start (one line says why)
EXIT_RAY_START = 4


def _train(args: argparse.Namespace) -> int:
    """Train; exits 0 when the run ended by itself, ``128 + signum`` (130 for SIGINT, 143 for
    SIGTERM) when a signal stopped it (after its checkpoint and summary),
    :data:`EXIT_RAY_START` when the local Ray did not start (overload)."""
    show_layouts()
    from distmarl.config import load_config
    from distmarl.runtime.driver.cluster import RayStartError
    from distmarl.runtime.driver.stopping import exit_code
    from distmarl.runtime.driver.trainer import Stopped, train
    from distmarl.storage import is_remote

    cfg = load_config(_existing(args.config, "config file"), args.set or [])
    if args.no_mlflow:
        cfg.tracking.mlflow = False
    if args.mlflow_uri:
        cfg.tracking.mlflow_uri = args.mlflow_uri
    if args.storage:
        cfg.tracking.storage = args.storage
    if args.resume and not is_remote(args.resume):
        _existing(args.resume, "run directory")
    try:
        summary = train(cfg, address=args.address, resume=args.resume, run_dir=args.run_dir,
                        summary_json=args.summary_json, show_progress=not args.quiet,
                        num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                        dashboard=not args.no_dashboard, local=args.local)
    except Stopped as stopped:
        print(f"distmarl: {stopped}", file=sys.stderr)
        return exit_code(stopped.signum)
    except RayStartError as err:
        print(f"distmarl: {err}", file=sys.stderr)
        return EXIT_RAY_START
    for line in [*step_lines(summary), *time_lines(summary), *storage_lines(summary)]:
        print(line)
    print(result_line(summary))
    signum = summary.get("stop_signal")
    return 0 if signum is None else exit_code(signum)


def storage_lines(summary: dict[str, Any]) -> list[str]:
    """Where the run is kept, and what could not be written there (none without storage)."""
    if not summary.get("storage"):
        return []
    failed = summary.get("checkpoints", {}).get("failed", [])
    lines = [f"distmarl: run kept at {summary['storage']}"]
    lines += [f"distmarl: checkpoint at step {f['step']} not written to {f['where']}: "
              f"{f['error']}" for f in failed]
    lines += [f"distmarl: not written to storage: {e}" for e in summary.get("storage_errors", [])]
    return lines


def result_line(summary: dict[str, Any]) -> str:
    """The last line ``train`` prints: how the run ended and its result, the elite's score on
    the final evaluation's fixed episodes beside random play's (or the best fitness, when the
    run had no final evaluation)."""
    head = (f"distmarl: {summary['stop_reason']} after {summary['env_steps']:,} env steps"
            f"{_per_member(summary)} in {summary['wall_seconds']:.0f} s "
            f"({summary['env_steps_per_s']:,.0f}/s), {summary['generations']} generations")
    if summary.get("final_games"):
        result = league_result(summary)
    elif summary["final_score"] is not None:
        result = (f"final score {summary['final_score']:.1f} "
                  f"(+-{summary['final_score_stderr']:.1f}, member {summary['elite']}, "
                  f"{summary['final_episodes']} fixed episodes; random play "
                  f"{summary['random_score']:.1f})")
    else:
        best = summary["best_fitness"]
        result = f"best fitness {'n/a' if best is None else f'{best:.2f}'}"
    return f"{head}, {result}; run in {summary['run_dir']}"


def step_lines(summary: dict[str, Any]) -> list[str]:
    """What compiling or capturing the learners' update steps cost, and each that failed (a
    line each; none for eager steps)."""
    lines = [f"distmarl: {msg}" for msg in summary.get("step_fallbacks", [])]
    if summary.get("compile_seconds"):
        steps = ", ".join(sorted(set(summary.get("learner_steps", []))))
        lines.append(f"distmarl: learners ({steps} steps) spent "
                     f"{summary['compile_seconds']:.1f} s compiling or capturing them")
    return lines


def time_lines(summary: dict[str, Any]) -> list[str]:
    """Where the run's time went, each kind of actor's shares, and what held it back most."""
    from distmarl.runtime.logic.time_spent import bottleneck, time_line

    shares = summary.get("time")
    if not shares:
        return []
    return [f"distmarl: time: {time_line(shares)}", f"distmarl: {bottleneck(shares)}"]


def _per_member(summary: dict[str, Any]) -> str:
    """`` (4 members, 90,000 each)``: the population's env steps per member, as
    ``training.max_steps_per_member`` counts them."""
    steps = [int(m["env_steps"]) for m in summary.get("members", [])]
    if not steps:
        return ""
    each = f"{steps[0]:,}" if min(steps) == max(steps) else f"{min(steps):,}-{max(steps):,}"
    return f" ({len(steps)} members, {each} each)"


def league_result(summary: dict[str, Any]) -> str:
    """A league run's result: each side's elite against every reference it met, as win /
    draw / loss shares of its final games."""
    parts = []
    for side, elite in summary["final_elites"].items():
        rows = [r for r in summary["final_games"]
                if r["player"] == f"member/{elite}" and r["kind"] == "member"]
        games = ", ".join(f"{r['opponent']} {r['win']:.0%}/{r['draw']:.0%}/{r['loss']:.0%}"
                          for r in rows)
        who = f"member {elite}" + ("" if len(summary["final_elites"]) == 1 else f" ({side})")
        parts.append(f"{who} won/drew/lost against {games}")
    return f"final games ({summary['final_episodes']} each): " + "; ".join(parts)


def _config_schema(args: argparse.Namespace) -> int:
    from distmarl.config.reference import json_schema

    print(json.dumps(json_schema(), indent=1))
    return 0


def _config_reference(args: argparse.Namespace) -> int:
    from distmarl.config.reference import markdown

    print(markdown(), end="")
    return 0


def _config_show(args: argparse.Namespace) -> int:
    from distmarl.config import load_config

    print(load_config(_existing(args.config, "config file"), args.set or []).to_yaml(), end="")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    """Exits 0 when every run finished, 1 when one failed (the others ran), the signal's
    status (130, 143) when stopped."""
    from distmarl.config import ConfigError
    from distmarl.studies.plan import SweepPlan
    from distmarl.studies.report import find_runs
    from distmarl.studies.runner import Placement
    from distmarl.studies.sweep import run_sweep

    config = _existing(args.config, "config file")
    if args.parallel is not None and args.parallel < 1:
        raise ConfigError(f"--parallel {args.parallel}: at least 1 run at a time")
    plan = SweepPlan.parse(config, args.seeds, args.grid or [], args.set or [], args.arm or [])
    out = Path(args.out).expanduser() if args.out else Path("sweeps") / config.stem
    say = (lambda line: None) if args.quiet else (
        lambda line: print(f"distmarl: sweep: {line}", flush=True))
    outcome = run_sweep(plan, out, Placement(args.local, args.address, args.parallel), say)
    if outcome.stop_signal is not None:
        print(f"distmarl: sweep stopped by signal {outcome.stop_signal}; the same command "
              "resumes it", file=sys.stderr)
        return outcome.exit_status()
    report = out / "report" / "report.md"
    if report.exists():
        print(report.read_text(), end="")
        n = len(find_runs([out]))
        print(f"distmarl: {n} run{'' if n == 1 else 's'} in {out}; report written to "
              f"{report.parent}")
    for name, code, log in outcome.failed:
        print(f"distmarl: sweep run {name} failed (exit {code}); its log: {log}; the same "
              "command runs it again", file=sys.stderr)
    return outcome.exit_status()


def _report(args: argparse.Namespace) -> int:
    from distmarl.studies.report import Report, find_runs

    paths = [_existing(p, "run or sweep folder") for p in args.dirs]
    report = Report(find_runs(paths), seed=args.seed)
    out = Path(args.out) if args.out else paths[0] / "report"
    written = report.write(out)
    print(report.markdown(), end="")
    print(f"distmarl: report written to {', '.join(str(p) for p in written)}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from distmarl.league.saved import evaluate_saved

    with _checkpoint_at(args.checkpoint) as path:
        result = evaluate_saved(path, args.episodes, member=args.member, seed=args.seed)
    print(json.dumps(result, indent=1))
    return 0


def _check_env(args: argparse.Namespace) -> int:
    import yaml

    from distmarl.collect.env_check import check_env

    kwargs: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: write KEY=VALUE (an env keyword argument)")
        kwargs[key] = yaml.safe_load(value)
    result = check_env(args.spec, kwargs)
    print(result.text())
    return 0 if result.passed else 1


def _play(args: argparse.Namespace) -> int:
    from distmarl.collect.evaluation import load_member
    from distmarl.collect.play import VIDEO_SUFFIXES, play, write_video

    if args.video and Path(args.video).suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"--video {args.video}: name a .gif or .mp4 file")
    if args.episodes < 1:
        raise ValueError(f"--episodes {args.episodes}: play at least 1")
    with _checkpoint_at(args.checkpoint) as path:
        cfg, algo, index, where = load_member(path, args.member)
    played = play(cfg, [algo], args.episodes, args.seed, "human" if args.human else "rgb_array")
    video = str(write_video(played.frames, Path(args.video), args.fps)) if args.video else None
    print(json.dumps({"checkpoint": where, "member": index, "returns": played.returns,
                      "steps": played.steps, "video": video}, indent=1))
    return 0


def _export(args: argparse.Namespace) -> int:
    from distmarl.collect.evaluation import load_member
    from distmarl.export import export_policy

    with _checkpoint_at(args.checkpoint) as path:
        _, algo, index, where = load_member(path, args.member)
    out = export_policy(algo, Path(args.out), args.format)
    print(json.dumps({"checkpoint": where, "member": index, "format": args.format,
                      "out": str(out), "agents": list(algo.agents)}, indent=1))
    return 0


def _talk_to_cluster(address: str, action: Callable[[Any], int]) -> int:
    """Build the job server's client (with the Ray token, see ``distmarl.job_auth``) and run
    ``action(client)``. A server that refuses the token, or wants one none was found for, exits
    4 naming what to set; one that cannot be reached or answers an error (an unknown job id)
    exits 4 with Ray's message."""
    from ray.dashboard.utils import get_address_for_submission_client
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    from distmarl import job_auth, jobs

    url = address
    try:
        url = get_address_for_submission_client(address)  # applies $RAY_API_SERVER_ADDRESS
        client = JobSubmissionClient(url, headers=job_auth.token_headers(url))
        return int(action(client))
    except AuthenticationError as err:
        refused = err.message.startswith("Authentication failed")
        print(job_auth.auth_failure_message(url, refused), file=sys.stderr)
    except (ConnectionError, RuntimeError) as err:
        print(f"distmarl: Ray job server {address}: {err}", file=sys.stderr)
    return jobs.EXIT_UNREACHABLE


def _submit(args: argparse.Namespace) -> int:
    from distmarl import job_request, jobs

    request = job_request.prepare_submission(  # config errors exit 2 here, before any connection
        args.config, args.set or [], working_dir=args.working_dir,
        runtime_env_file=args.runtime_env, mlflow_uri=args.mlflow_uri,
        forward_mlflow_env=not args.no_mlflow_env, submission_id=args.submission_id,
        sweep=_sweep_job_args(args))
    address = args.address or jobs.default_address()
    return _talk_to_cluster(address, lambda client: jobs.run_submit(
        client, request, address=address, wait=not args.no_wait,
        agent_wait_s=args.agent_wait, out=sys.stdout, err=sys.stderr))


def _sweep_job_args(args: argparse.Namespace) -> list[str]:
    """``distmarl sweep``'s arguments for a sweep job (``submit --sweep``), checked here as
    the sweep would check them; none for a training job."""
    from distmarl.config import ConfigError
    from distmarl.studies.plan import SweepPlan

    given = [f"--{k}" for k in ("seeds", "grid", "arm", "parallel", "out") if getattr(args, k)]
    if not args.sweep:
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --sweep")
        return []
    if not args.seeds:
        raise ConfigError("--sweep needs --seeds (a range, 0-4, or a list, 0,2,5)")
    SweepPlan.parse(_existing(args.config, "config file"), args.seeds, args.grid or [],
                    args.set or [], args.arm or [])
    if args.out and not (Path(args.out).is_absolute() or args.out.startswith("~")):
        raise ConfigError(f"--out {args.out}: give the sweep's folder on the head as an "
                          "absolute path (or ~/...): a relative one would be inside the job's "
                          "working-dir upload, which Ray deletes")
    return [*("--seeds", args.seeds), *[a for g in args.grid or [] for a in ("--grid", g)],
            *[a for arm in args.arm or [] for a in ("--arm", *arm)],
            *(("--parallel", str(args.parallel)) if args.parallel else ()),
            *(("--out", args.out) if args.out else ())]


def _jobs(args: argparse.Namespace) -> int:
    from distmarl import jobs

    def action(client: Any) -> int:
        if args.jobs_command == "list":
            return jobs.list_jobs(client)
        if args.jobs_command == "status":
            return jobs.job_status(client, args.job_id, as_json=args.json)
        if args.jobs_command == "logs":
            return jobs.job_logs(client, args.job_id, follow_logs=args.follow)
        return jobs.stop_job(client, args.job_id, wait=args.wait)

    return _talk_to_cluster(args.address or jobs.default_address(), action)


def _add_submit_parsers(sub: Any) -> None:
    from distmarl.jobs import AGENT_WAIT_S

    address_help = ("Ray job server (the dashboard), e.g. http://HOST:8265 (default: "
                    "$RAY_API_SERVER_ADDRESS, $RAY_ADDRESS or http://127.0.0.1:8265)")
    sm = sub.add_parser(
        "submit", help="run `distmarl train CONFIG` on a Ray cluster as a Ray job",
        description="Validate CONFIG here, ship it with the job, run `distmarl train` on the "
                    "cluster and follow its logs. Exits 0 when the job SUCCEEDED, 1 when it "
                    "FAILED, 3 when it was STOPPED, 2 on a config error, 4 when the job server "
                    "cannot be reached or refuses the request (a missing or wrong Ray token: the "
                    "message names what to set). MLflow URI and credentials (MLFLOW_TRACKING_URI, "
                    "_USERNAME, _PASSWORD, _TOKEN) reach the job only as runtime_env env_vars.")
    sm.add_argument("config", help="experiment YAML")
    sm.add_argument("--address", help=address_help)
    sm.add_argument("--working-dir", metavar="DIR",
                    help="upload DIR with the job (the config is added to it)")
    sm.add_argument("--runtime-env", metavar="FILE", help="runtime_env YAML (e.g. deploy/runtime_env.yaml)")
    sm.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value")
    sm.add_argument("--mlflow-uri", help="MLflow tracking URI for the job (sent as MLFLOW_TRACKING_URI)")
    sm.add_argument("--no-mlflow-env", action="store_true",
                    help="do not forward this shell's MLFLOW_TRACKING_* variables")
    sm.add_argument("--submission-id", help="job id (default: distmarl-<name>-<time>-<random>)")
    sm.add_argument("--no-wait", action="store_true", help="return once submitted")
    sm.add_argument("--sweep", action="store_true",
                    help="run `distmarl sweep CONFIG` as the job instead: its runs side by "
                         "side as the cluster has room, then its report")
    sm.add_argument("--seeds", help="with --sweep: the sweep's seeds (0-4, 0,2,5)")
    sm.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                    help="with --sweep: a config key and its values (repeat: every combination)")
    sm.add_argument("--arm", action="append", nargs="+", metavar=("NAME", "KEY=VALUE"),
                    help="with --sweep: a named arm and its overrides (repeat: one per arm)")
    sm.add_argument("--parallel", type=int, metavar="N", help="with --sweep: at most N runs at once")
    sm.add_argument("--out", metavar="DIR", help="with --sweep: the sweep's folder on the head, "
                    "absolute or ~/... (default: tracking.directory/sweeps/<name>)")
    sm.add_argument("--agent-wait", type=float, default=AGENT_WAIT_S, metavar="SECONDS",
                    help="while the head's job agent is still starting (Ray: 'please try again "
                         "later'), ask again with growing pauses for up to SECONDS "
                         "(default: %(default)g)")
    sm.set_defaults(func=_submit)

    jb = sub.add_parser("jobs", help="list, inspect, follow or stop Ray jobs")
    jb_sub = jb.add_subparsers(dest="jobs_command", required=True)
    ls = jb_sub.add_parser("list", help="every job of the cluster")
    ls.add_argument("--address", help=address_help)
    st = jb_sub.add_parser("status", help="a job's status and message (credentials masked)")
    st.add_argument("job_id", metavar="ID")
    st.add_argument("--address", help=address_help)
    st.add_argument("--json", action="store_true", help="print JSON")
    lg = jb_sub.add_parser("logs", help="a job's logs")
    lg.add_argument("job_id", metavar="ID")
    lg.add_argument("--address", help=address_help)
    lg.add_argument("--follow", "-f", action="store_true", help="follow until the job ends")
    sp = jb_sub.add_parser("stop", help="stop a job")
    sp.add_argument("job_id", metavar="ID")
    sp.add_argument("--address", help=address_help)
    sp.add_argument("--wait", action="store_true", help="wait until it has stopped")
    jb.set_defaults(func=_jobs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distmarl", description="train, evaluate, watch (play) and export populations of "
        "multi-agent RL members; check an env; submit and follow Ray jobs; show configs; "
        "inspect a saved buffer")
    parser.add_argument("--version", action="version", version=f"distmarl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("buffer-info", help="print the size, counters and config of a buffer "
                          "file, or of a checkpoint's buffer (its replay shards added up)")
    info.add_argument("path", help="a file written by MultiAgentReplayBuffer.save, or a "
                      "checkpoint folder (or a run's checkpoints/ folder: its latest)")
    info.set_defaults(func=_buffer_info)

    tr = sub.add_parser("train", help="train a population (a local Ray unless --address)")
    tr.add_argument("config", help="experiment YAML")
    tr.add_argument("--address", help="join this Ray cluster instead of starting a local one")
    tr.add_argument("--local", action="store_true",
                    help="the whole population in this process, without Ray (debugging, "
                         "notebooks; a seeded run repeats exactly)")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value")
    tr.add_argument("--summary-json", help="write the final figures to this JSON file")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (a folder, or its URI on an object store: s3://bucket/runs/NAME) from its last checkpoint")
    tr.add_argument("--storage", metavar="URI", help="keep the run there too: a shared folder or an object store (s3://bucket/runs, gs://..., hdfs://...; tracking.storage)")
    tr.add_argument("--run-dir", help="run directory (default: tracking.directory/<time>-<name>)")
    tr.add_argument("--mlflow-uri", help="MLflow tracking URI (default: a local store in the run directory)")
    tr.add_argument("--no-mlflow", action="store_true", help="do not track the run in MLflow")
    tr.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    tr.add_argument("--num-gpus", type=int, help="GPUs of the local Ray (default: detected)")
    tr.add_argument("--no-dashboard", action="store_true",
                    help="start the local Ray without its dashboard's web view, job server "
                         "and state API (a lighter start)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=_train)

    cfg = sub.add_parser("config", help="config tools")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    show = cfg_sub.add_parser("show", help="print the resolved config")
    show.add_argument("config")
    show.add_argument("--set", action="append", metavar="KEY=VALUE")
    show.set_defaults(func=_config_show)
    cfg_sub.add_parser("schema", help="print the config's JSON Schema (for editors)"
                       ).set_defaults(func=_config_schema)
    cfg_sub.add_parser("reference", help="print every key with its type, default and "
                                         "description (docs/config.md)"
                       ).set_defaults(func=_config_reference)

    ev = sub.add_parser("evaluate", help="score a saved member")
    ev.add_argument("checkpoint", help="a checkpoint folder, or a run's checkpoints/ folder (latest); or one of them (or a run folder) on an object store: s3://bucket/runs/NAME")
    ev.add_argument("--episodes", type=int,
                    help="episodes (default: the run's evolution.final_episodes)")
    ev.add_argument("--member", type=int,
                    help="member index (default: the run's elite, else the best by fitness)")
    ev.add_argument("--seed", type=int,
                    help="seed of the episodes (default: the run's evolution.final_seed)")
    ev.set_defaults(func=_evaluate)

    sw = sub.add_parser("sweep", help="train every arm with every seed, each as a "
                        "distmarl train process (resumable), then report them (as distmarl "
                        "report)")
    sw.add_argument("config", help="experiment YAML")
    sw.add_argument("--seeds", required=True, help="seeds: a range (0-4) or a list (0,2,5)")
    sw.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                    help="a config key and the values it takes (repeat: every combination, "
                         "each an arm named k=v,k=v)")
    sw.add_argument("--arm", action="append", nargs="+", metavar=("NAME", "KEY=VALUE"),
                    help="an arm named NAME with its overrides (repeat: one per arm; not with "
                         "--grid)")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="an override of every run")
    sw.add_argument("--out", help="the sweep's folder (default: sweeps/<config name>); the "
                    "same command resumes it, more arms or seeds extend it")
    where = sw.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true",
                       help="each run in a process of its own, without Ray")
    where.add_argument("--address", help="the runs on this Ray cluster, side by side as it "
                       "has room (default: $RAY_ADDRESS where set; else a local Ray each)")
    sw.add_argument("--parallel", type=int, metavar="N",
                    help="at most N runs at once (default: one on this machine; on a cluster "
                         "as many as it has room for); on this machine each run's Ray gets "
                         "1/N of the cores")
    sw.add_argument("--quiet", action="store_true", help="no line as each run starts and ends")
    sw.set_defaults(func=_sweep)

    rp = sub.add_parser("report", help="many runs' final scores by arm: mean ± standard error, "
                        "IQM and probability of improvement with 95%% bootstrap intervals, "
                        "paired differences, curves and the performance profile")
    rp.add_argument("dirs", nargs="+", metavar="DIR",
                    help="run directories, or folders holding them (a sweep's)")
    rp.add_argument("--out", help="where report.md, report.json (marl-eval's layout), "
                    "curves.png and profile.png go (default: DIR/report of the first DIR)")
    rp.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    rp.set_defaults(func=_report)

    ce = sub.add_parser("check-env", help="check an env for training: PettingZoo's API test, "
                                          "spaces, masks, state, render modes, which "
                                          "algorithms fit")
    ce.add_argument("spec", help="env.spec: module:attribute (or a PettingZoo name)")
    ce.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="an env keyword argument (YAML value), as env.kwargs")
    ce.set_defaults(func=_check_env)

    pl = sub.add_parser("play", help="watch a saved member play its greedy episodes (a "
                                     "window, or a .gif / .mp4)")
    pl.add_argument("checkpoint", help="a checkpoint folder, or a run's checkpoints/ folder (latest); or one of them (or a run folder) on an object store: s3://bucket/runs/NAME")
    pl.add_argument("--member", type=int,
                    help="member index (default: the run's elite, else the best by fitness)")
    pl.add_argument("--episodes", type=int, default=1, help="episodes (default: 1)")
    pl.add_argument("--seed", type=int, default=0, help="seed of the first episode (default: 0)")
    pl.add_argument("--video", metavar="PATH", help="write the frames to PATH (.gif, or .mp4 "
                                                    "with the video extra)")
    pl.add_argument("--fps", type=int, default=15,
                    help="frames per second of the video (default 15)")
    pl.add_argument("--human", action="store_true", help="draw in a window (the env's human "
                                                         "render mode) instead")
    pl.set_defaults(func=_play)

    ex = sub.add_parser("export", help="write a saved member's greedy policy as TorchScript "
                                       "or ONNX files that run without distmarl")
    ex.add_argument("checkpoint", help="a checkpoint folder, or a run's checkpoints/ folder (latest); or one of them (or a run folder) on an object store: s3://bucket/runs/NAME")
    ex.add_argument("out", help="folder to write (policy.json and a file per agent)")
    ex.add_argument("--format", choices=EXPORT_FORMATS, default="torchscript",
                    help="torchscript (runs with torch alone) or onnx (with onnxruntime alone; "
                         "writing it needs the export extra)")
    ex.add_argument("--member", type=int,
                    help="member index (default: the run's elite, else the best by fitness)")
    ex.set_defaults(func=_export)

    _add_submit_parsers(sub)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """distmarl's own warnings as one line (``distmarl: warning: ...``), others as Python
    shows them."""
    if category.__module__.startswith("distmarl"):
        print(f"distmarl: warning: {message}", file=file or sys.stderr)
    else:
        print(warnings.formatwarning(message, category, filename, lineno, line), end="",
              file=file or sys.stderr)


#: exit status when the reader of the output stopped reading (a closed pipe: ``| head``):
#: 128 + SIGPIPE, what a shell reports for git or ls in the same place
EXIT_BROKEN_PIPE = 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit status. Output piped into a reader that stops
    (``distmarl config schema | head``) ends the command quietly with
    :data:`EXIT_BROKEN_PIPE`, as git and ls do, whatever the command."""
    try:
        try:
            return _command(argv)
        finally:
            sys.stdout.flush()  # here, not at exit: a closed pipe must raise where it is caught
    except BrokenPipeError:
        # what is left in stdout's buffer goes nowhere (Python flushes it again at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _command(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError) as err:
        print(f"distmarl: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
