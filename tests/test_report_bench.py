"""docs/benchmarks.md is what ``python -m benchmarks.report`` writes from the stored results:
a hand edit of the document fails here, its tables hold the stored figures cell for cell, and
every benchmark module the results or the scripts name exists."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks import ROOT
from benchmarks.report import (
    DOC,
    RESULTS,
    command_lines,
    load,
    paragraphs,
    render,
    render_result,
    table_cells,
    wrap,
)


def test_the_document_is_what_the_report_writes() -> None:
    assert DOC.read_text() == render(), (
        "docs/benchmarks.md differs from the stored results: edit benchmarks/results/*.json "
        "and run `python -m benchmarks.report`")


def test_the_documents_tables_hold_the_stored_figures() -> None:
    _, sections = load()
    stored = [[r["table"]["columns"], *r["table"]["rows"]]
              for s in sections for r in s["results"] if r.get("table")]
    assert table_cells(DOC.read_text()) == stored
    assert len(stored) > 30  # every section's tables, not an empty document


def test_every_result_records_its_provenance() -> None:
    _, sections = load()
    for section in sections:
        for result in section["results"]:
            assert {"commands", "date", "machine", "commit"} <= set(result), section["title"]


def _module_names(text: str) -> set[str]:
    """Dotted names under ``benchmarks`` (not a file such as ``docs/benchmarks.md``)."""
    return set(re.findall(r"(?<![/\w])benchmarks(?:\.[a-z_]+)+", text)) - {"benchmarks.md"}


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent is a module, not a package
        return None


def test_every_benchmark_module_named_exists() -> None:
    named = _module_names(DOC.read_text())
    for script in (ROOT / "benchmarks").rglob("*.py"):
        named |= _module_names(script.read_text())
    assert "benchmarks.system.throughput" in named
    # a name may go on to an attribute (benchmarks.micro.timing.best_rate): its longest prefix
    # that is a module must be below the package, and a module, not a folder of them, unless
    # the name is that folder
    for name in sorted(named):
        parts = name.split(".")
        prefix, spec = next((".".join(parts[:i]), _spec(".".join(parts[:i])))
                             for i in range(len(parts), 0, -1)
                             if _spec(".".join(parts[:i])) is not None)
        assert prefix != "benchmarks", f"no module {name}"
        assert spec is not None and (spec.submodule_search_locations is None or prefix == name), (
            f"no module {name}")


def test_a_result_without_a_commit_or_date_says_so() -> None:
    lines = render_result({"commands": ["python -m benchmarks.report"], "date": None,
                           "machine": "a laptop", "commit": None, "notes": ["What it is."],
                           "table": {"columns": ["a", "b"], "rows": [["1", ""]]},
                           "reading": []})
    text = "\n".join(lines)
    assert "Measured: date not recorded. Machine: a laptop. Code version: not recorded." in text
    assert "| 1 | |" in text and "```bash\npython -m benchmarks.report\n```" in text
    assert "Command: not recorded." in "\n".join(render_result(
        {"commands": None, "date": "2026-01-01", "machine": "m", "commit": "abc"}))


def test_paragraphs_wrap_without_starting_a_line_as_markup() -> None:
    text = ("Paired difference Ray - in process: " + "word " * 13 + "x - y " * 30).strip()
    for width_text in (text, "- " + text):
        lines = wrap(width_text, "  " if width_text.startswith("- ") else "")
        assert all(len(line) <= 100 for line in lines)
        assert not any(line.lstrip().startswith(("- ", "+ ", "* ", "| ", "> "))
                       for line in lines[1:])
    # list items follow each other; a paragraph after a list is set apart
    assert paragraphs(["- a", "- b", "c"]) == ["- a", "- b", "", "c"]


def test_long_commands_continue_before_an_option() -> None:
    lines = command_lines("python -m benchmarks.system.scaling " + "--set a.b=1 " * 12 + "--x")
    assert all(len(line) <= 100 for line in lines) and len(lines) > 1
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert all(line.startswith("    --") for line in lines[1:])


def test_a_section_file_missing_from_the_index_is_named(tmp_path: Path) -> None:
    index: dict[str, Any] = {"title": "T", "intro": [], "sections": ["a"]}
    (tmp_path / "index.json").write_text(json.dumps(index))
    (tmp_path / "a.json").write_text(json.dumps({"title": "A", "notes": [], "results": []}))
    assert render(tmp_path) == "# T\n\n## A\n"
    (tmp_path / "b.json").write_text(json.dumps({"title": "B", "notes": [], "results": []}))
    with pytest.raises(ValueError, match=r"not in index.json \['b'\]"):
        render(tmp_path)
    assert RESULTS.is_dir()
