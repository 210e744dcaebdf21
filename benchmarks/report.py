"""Writes ``docs/benchmarks.md`` from the stored results in ``benchmarks/results``.

    .venv/bin/python -m benchmarks.report            # write the document
    .venv/bin/python -m benchmarks.report --check    # exit 1 when the document is not current
    .venv/bin/python -m benchmarks.report --stamp "python -m benchmarks.system.fleets"

``index.json`` holds the document's title, its opening paragraphs and the order of the
sections; each other file is one section: ``{"title", "notes", "results"}``. A result is one
measurement as it was run: its ``commands``, ``date``, ``machine`` and ``commit`` (the code
version; null where it was not recorded), the ``notes`` a reader needs before its table (what
it measures), an optional ``heading``, the ``table`` (``{"columns", "rows"}``, cells as text
exactly as shown) and the ``reading`` after it (how to read it). A section holds its current
results only: a new measurement replaces the old one in its file, and git keeps the history.
``--stamp COMMAND`` prints the date, machine, command and commit of a new result, to paste
into its file.

Paragraphs are stored one per string and wrapped here, so a figure edited in a JSON file never
leaves a ragged paragraph behind; consecutive ``- `` paragraphs form one list. A result whose
commands are those of the result above it (several tables of one run) shows them once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from benchmarks import ROOT

RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
WIDTH = 100
#: a wrapped line may not start with these: markdown would read a list, a quote, a heading or
#: a table row
_MARKUP_START = re.compile(r"([-+*>|#]|\d+[.)])(\s|$)")


def load(folder: Path = RESULTS) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The index and the sections in its order (ValueError naming a section file the index
    leaves out, or one it names that is missing)."""
    index = json.loads((folder / "index.json").read_text())
    files = {p.stem for p in folder.glob("*.json")} - {"index"}
    missing = [s for s in index["sections"] if s not in files]
    unlisted = sorted(files - set(index["sections"]))
    if missing or unlisted:
        raise ValueError(f"{folder}: sections missing {missing}, not in index.json {unlisted}")
    return index, [json.loads((folder / f"{s}.json").read_text()) for s in index["sections"]]


def render(folder: Path = RESULTS) -> str:
    """The whole document."""
    index, sections = load(folder)
    lines = [f"# {index['title']}"]
    if index["intro"]:
        lines += ["", *paragraphs(index["intro"])]
    for section in sections:
        lines += ["", f"## {section['title']}"]
        if section.get("notes"):
            lines += ["", *paragraphs(section["notes"])]
        commands = None
        for result in section["results"]:
            lines += ["", *render_result(result, show_commands=result["commands"] != commands)]
            commands = result["commands"]
    return "\n".join(lines) + "\n"


def render_result(result: dict[str, Any], show_commands: bool = True) -> list[str]:
    """One measurement: heading, commands (left out where ``show_commands`` is false: the
    same as the result above), notes, provenance, table, reading."""
    lines = [f"### {result['heading']}", ""] if result.get("heading") else []
    if result.get("commands") and show_commands:
        lines += ["```bash", *[line for c in result["commands"] for line in command_lines(c)],
                  "```", ""]
    if result.get("notes"):
        lines += [*paragraphs(result["notes"]), ""]
    lines += wrap(provenance(result))
    if result.get("table"):
        lines += ["", *table_lines(result["table"])]
    if result.get("reading"):
        lines += ["", *paragraphs(result["reading"])]
    return lines


def provenance(result: dict[str, Any]) -> str:
    """When, where and from which code version a result was measured."""
    command = "" if result.get("commands") else " Command: not recorded."
    return (f"Measured: {result.get('date') or 'date not recorded'}. "
            f"Machine: {result.get('machine') or 'not recorded'}. "
            f"Code version: {result.get('commit') or 'not recorded'}.{command}")


def table_lines(table: dict[str, Any]) -> list[str]:
    """A markdown table; every row as wide as the columns, no cell holding a ``|``."""
    columns, rows = table["columns"], table["rows"]
    for row in [columns, *rows]:
        if len(row) != len(columns) or any("|" in cell for cell in row):
            raise ValueError(f"row {row}: {len(columns)} cells without '|' expected")
    return [_row(columns), _row(["---"] * len(columns)), *(_row(r) for r in rows)]


def _row(cells: Sequence[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def table_cells(markdown: str) -> list[list[list[str]]]:
    """Every table of a markdown document as rows of cells (the separator row left out): how
    a test reads the figures back from the document."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) != {"-"}:
                tables[-1].append(cells)
        previous = line
    return tables


def paragraphs(texts: Sequence[str]) -> list[str]:
    """Paragraphs wrapped to :data:`WIDTH`, a blank line between them; list items (``- ``)
    follow each other directly, their continuation lines indented."""
    lines: list[str] = []
    for i, text in enumerate(texts):
        item = text.startswith("- ")
        if i and not (item and texts[i - 1].startswith("- ")):
            lines.append("")
        lines += wrap(text, "  " if item else "")
    return lines


def wrap(text: str, indent: str = "") -> list[str]:
    """``text`` wrapped to :data:`WIDTH` without a continuation line that markdown would read
    as markup (narrower until there is none); words are never broken."""
    for width in range(WIDTH, WIDTH // 2, -1):
        lines = textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                              break_on_hyphens=False)
        if not any(_MARKUP_START.match(line.lstrip()) for line in lines[1:]):
            return lines
    raise ValueError(f"cannot wrap without a line starting as markup: {text[:60]}...")


def command_lines(command: str) -> list[str]:
    """A shell command, continued over lines (``\\``) where it is wider than :data:`WIDTH`:
    before an option, or between words where one option's values are wider still."""
    parts: list[str] = []
    for part in re.split(r" (?=--)", command):
        words = part.split(" ")
        parts += [" ".join(words[:2]), *words[2:]] if len(part) > WIDTH - 6 else [part]
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 1 + len(part) + 2 > WIDTH:
            lines[-1] += " \\"
            lines.append("    " + part)
        else:
            lines[-1] += " " + part
    return lines


def stamp(command: str) -> dict[str, Any]:
    """The provenance of a result measured now: today's date, this machine, ``command`` and
    the checked-out commit (``-dirty`` when the working tree has changes)."""
    return {"commands": [command], "date": date.today().isoformat(), "machine": machine(),
            "commit": commit()}


def machine() -> str:
    """This machine in a few words: cores, CPU model, memory and any NVIDIA GPU."""
    cpu = platform.processor() or platform.machine()
    memory = ""
    if Path("/proc/cpuinfo").exists():
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                 .splitlines() if ln.startswith("model name")]
        cpu = names[0] if names else cpu
        kib = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                   if ln.startswith("MemTotal:"))
        memory = f", {kib / 2**20:.0f} GiB"
    gpus = _output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    gpu = f", {', '.join(gpus.splitlines())}" if gpus else ""
    return f"{os.cpu_count()}-core {cpu}{memory}{gpu}"


def commit() -> str | None:
    """The checked-out commit, ``-dirty`` when the working tree differs; None outside git."""
    head = _output(["git", "rev-parse", "HEAD"])
    if not head:
        return None
    return head + ("-dirty" if _output(["git", "status", "--porcelain"]) else "")


def _output(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when docs/benchmarks.md differs from the results")
    ap.add_argument("--stamp", metavar="COMMAND",
                    help="print a new result's date, machine, command and commit as JSON")
    args = ap.parse_args(argv)
    if args.stamp:
        print(json.dumps(stamp(args.stamp), indent=2))
        return 0
    text = render()
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC.relative_to(ROOT)} is not what `python -m benchmarks.report` writes "
                  "from benchmarks/results: edit the results, then run it", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
