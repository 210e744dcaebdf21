"""``distmarl`` command line. Subcommands arrive with their issues (train, evaluate, submit, jobs,
config); today: ``version`` and ``buffer-info``."""

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="distmarl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"distmarl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("buffer-info", help="print the size, counters and config of a buffer file")
    info.add_argument("path", help="a file written by MultiAgentReplayBuffer.save")
    info.set_defaults(func=_buffer_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as err:
        print(f"distmarl: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
