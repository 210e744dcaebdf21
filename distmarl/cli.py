"""``distmarl`` command line: train, evaluate, config show, buffer-info."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from distmarl import __version__


def _buffer_info(args: argparse.Namespace) -> int:
    from distmarl.buffers import MultiAgentReplayBuffer

    path = Path(args.path)
    if not path.exists():
        print(f"distmarl: buffer file {path} does not exist", file=sys.stderr)
        return 2
    buf = MultiAgentReplayBuffer.load(path)
    print(json.dumps({**buf.stats(), "config": buf.config()}, indent=2))
    return 0


def _existing(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {p} does not exist")
    return p


def _train(args: argparse.Namespace) -> int:
    from distmarl.config import load_config
    from distmarl.runtime.trainer import train

    cfg = load_config(_existing(args.config, "config file"), args.set or [])
    if args.no_mlflow:
        cfg.tracking.mlflow = False
    if args.mlflow_uri:
        cfg.tracking.mlflow_uri = args.mlflow_uri
    if args.resume:
        _existing(args.resume, "run directory")
    summary = train(cfg, address=args.address, resume=args.resume, run_dir=args.run_dir,
                    summary_json=args.summary_json, show_progress=not args.quiet,
                    num_cpus=args.num_cpus, num_gpus=args.num_gpus)
    best = summary["best_fitness"]
    print(f"distmarl: {summary['stop_reason']} after {summary['env_steps']:,} env steps in "
          f"{summary['wall_seconds']:.0f} s ({summary['env_steps_per_s']:,.0f}/s), "
          f"{summary['generations']} generations, best fitness "
          f"{'n/a' if best is None else f'{best:.2f}'}; run in {summary['run_dir']}")
    return 0


def _config_show(args: argparse.Namespace) -> int:
    from distmarl.config import load_config

    print(load_config(_existing(args.config, "config file"), args.set or []).to_yaml(), end="")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from distmarl.evaluation import evaluate_checkpoint

    result = evaluate_checkpoint(_existing(args.checkpoint, "checkpoint"), args.episodes,
                                 member=args.member, seed=args.seed)
    print(json.dumps(result, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="distmarl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"distmarl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("buffer-info", help="print the size, counters and config of a buffer file")
    info.add_argument("path", help="a file written by MultiAgentReplayBuffer.save")
    info.set_defaults(func=_buffer_info)

    tr = sub.add_parser("train", help="train a population (a local Ray unless --address)")
    tr.add_argument("config", help="experiment YAML")
    tr.add_argument("--address", help="join this Ray cluster instead of starting a local one")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value")
    tr.add_argument("--summary-json", help="write the final figures to this JSON file")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    tr.add_argument("--run-dir", help="run directory (default: tracking.directory/<time>-<name>)")
    tr.add_argument("--mlflow-uri", help="MLflow tracking URI (default: a local store in the run directory)")
    tr.add_argument("--no-mlflow", action="store_true", help="do not track the run in MLflow")
    tr.add_argument("--num-cpus", type=int, help="CPUs of the local Ray (default: all)")
    tr.add_argument("--num-gpus", type=int, help="GPUs of the local Ray (default: detected)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=_train)

    cfg = sub.add_parser("config", help="config tools")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    show = cfg_sub.add_parser("show", help="print the resolved config")
    show.add_argument("config")
    show.add_argument("--set", action="append", metavar="KEY=VALUE")
    show.set_defaults(func=_config_show)

    ev = sub.add_parser("evaluate", help="score a saved member")
    ev.add_argument("checkpoint", help="a checkpoint folder, or a run's checkpoints/ folder (latest)")
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--member", type=int, help="member slot (default: the best by fitness)")
    ev.add_argument("--seed", type=int, default=0)
    ev.set_defaults(func=_evaluate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError) as err:
        print(f"distmarl: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
