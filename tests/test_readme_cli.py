"""README.md's command-line block against the real parser (``distmarl.cli.build_parser``).

The block (the fenced block under "Using it" whose lines start ``distmarl``) is written by hand;
these tests read it as usage lines and compare them with argparse's own parsers, so a command,
positional argument or option that the CLI has and the README lacks (or the reverse) fails
naming it. The block's notation, as argparse's usage lines write it:

- a line starting with blanks continues the line above; ``  # ...`` is a comment;
- lowercase words after ``distmarl`` are the command (``config show``), UPPERCASE words its
  positional arguments, in order; ``[...]`` holds optional parts;
- an option is ``--name VALUE`` (a flag stands alone); for an option with choices, VALUE lists
  them as ``a|b``; an option of several words writes the rest as ``KEY=VALUE`` words after its
  VALUE (``--arm NAME KEY=VALUE ...``);
- `` | `` between commands gives alternatives sharing the words before them
  (``config schema | reference``); ``{a ... | b ...} TAIL`` gives alternatives that all end
  with TAIL (an option every one of them takes).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from distmarl.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
COMMAND_WORD = re.compile(r"[a-z][a-z0-9-]*")
POSITIONAL = re.compile(r"[A-Z][A-Z0-9_]*")
OPEN, CLOSE = "[{", "]}"


@dataclass
class Option:
    """An option as the README writes it."""

    name: str
    value: str | None  # the metavar or choices after it; None for a flag
    optional: bool  # written in brackets


@dataclass
class Usage:
    """One command's usage as the README writes it."""

    path: tuple[str, ...]  # the command words after ``distmarl``, e.g. ("config", "show")
    positionals: list[str] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # words the notation does not explain


@dataclass
class Command:
    """One command as argparse defines it (``-h`` left out)."""

    path: tuple[str, ...]
    positionals: list[str]  # metavar, else dest in capitals
    options: dict[str, argparse.Action]  # every option string of each option
    is_leaf: bool  # takes no further subcommand


def readme_block(text: str) -> list[str]:
    """The command block's logical lines: continuations joined, comments dropped."""
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        if block.startswith("distmarl "):
            break
    else:
        raise AssertionError("README.md has no ```bash block starting with `distmarl `")
    lines: list[str] = []
    for raw in block.splitlines():
        code = re.sub(r"\s+#.*$", "", raw).rstrip()
        if not code:
            continue
        if code[0].isspace():
            assert lines, f"README.md's command block starts with a continuation: {raw!r}"
            lines[-1] += " " + code.strip()
        else:
            assert code.startswith("distmarl "), f"README.md's command block: {raw!r}"
            lines.append(code)
    return lines


def tokens(line: str) -> list[str]:
    """Words and brackets: ``[--format torchscript|onnx]`` is ``[``, ``--format``,
    ``torchscript|onnx``, ``]``; a ``|`` between blanks is its own token."""
    return re.findall(r"[\[\]{}]|[^\s\[\]{}]+", line)


def split_top(toks: list[str]) -> list[list[str]]:
    """``toks`` split at each ``|`` outside brackets."""
    parts: list[list[str]] = [[]]
    depth = 0
    for tok in toks:
        depth += (tok in OPEN) - (tok in CLOSE)
        assert depth >= 0, f"unbalanced brackets in {' '.join(toks)!r}"
        if tok == "|" and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    assert depth == 0, f"unbalanced brackets in {' '.join(toks)!r}"
    return parts


def matching(toks: list[str]) -> int:
    """The index of the bracket that closes ``toks[0]``."""
    depth = 0
    for i, tok in enumerate(toks):
        depth += (tok in OPEN) - (tok in CLOSE)
        if depth == 0:
            return i
    raise AssertionError(f"unbalanced brackets in {' '.join(toks)!r}")


def command_words(toks: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The leading command words of ``toks``, and the rest."""
    n = 0
    while n < len(toks) and COMMAND_WORD.fullmatch(toks[n]):
        n += 1
    return tuple(toks[:n]), toks[n:]


def usages(line: str) -> list[Usage]:
    """The usages one logical line of the block stands for."""
    toks = tokens(line)
    assert toks[0] == "distmarl", line
    words, rest = command_words(toks[1:])
    if rest and rest[0] == "{":
        close = matching(rest)
        alternatives, tail, prefix = split_top(rest[1:close]), rest[close + 1:], words
    else:
        alternatives = split_top(toks[1:])
        if len(alternatives) == 1:
            return [parse_usage(words, rest)]
        prefix, tail = words[:-1], []
        alternatives[0] = alternatives[0][len(prefix):]
    found = []
    for alternative in alternatives:
        own, args = command_words(alternative)
        assert own, f"an alternative without a command word in {line!r}"
        found.append(parse_usage(prefix + own, args + tail))
    return found


#: the further words of an option taking several (``--arm NAME KEY=VALUE ...``)
MORE_VALUES = re.compile(r"[A-Z_]+=[A-Z_]+")


def parse_usage(path: tuple[str, ...], toks: list[str]) -> Usage:
    """Positionals and options of one command's arguments as the README writes them."""
    usage = Usage(path)
    depth, i = 0, 0
    while i < len(toks):
        tok = toks[i]
        if tok in OPEN or tok in CLOSE:
            depth += 1 if tok in OPEN else -1
        elif tok.startswith("-"):
            after = toks[i + 1] if i + 1 < len(toks) else None
            takes = after is not None and after not in (*OPEN, *CLOSE, "|") and after[0] != "-"
            usage.options.append(Option(tok, after if takes else None, depth > 0))
            i += takes
        elif depth == 0 and POSITIONAL.fullmatch(tok):
            usage.positionals.append(tok)
        elif MORE_VALUES.fullmatch(tok) and usage.options and usage.options[-1].value:
            pass  # the option before it takes more words than its VALUE
        elif tok not in ("|", "..."):
            usage.stray.append(tok)
        i += 1
    return usage


def commands(parser: argparse.ArgumentParser,
             path: tuple[str, ...] = ()) -> list[Command]:
    """Every command of ``parser``, its subcommands' recursively, the root (``()``) first."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    options = {s: a for a in parser._actions if a.option_strings
               and not isinstance(a, argparse._HelpAction) for s in a.option_strings}
    positionals = [a.metavar if isinstance(a.metavar, str) else a.dest.upper()
                   for a in parser._actions if not a.option_strings
                   and not isinstance(a, argparse._SubParsersAction)]
    found = [Command(path, positionals, options, is_leaf=not subparsers)]
    for action in subparsers:
        for name, sub in action.choices.items():
            found += commands(sub, (*path, name))
    return found


def show(path: tuple[str, ...]) -> str:
    return " ".join(("distmarl", *path))


@pytest.fixture(scope="module")
def cli() -> dict[tuple[str, ...], Command]:
    return {c.path: c for c in commands(build_parser())}


@pytest.fixture(scope="module")
def readme() -> dict[tuple[str, ...], list[Usage]]:
    found: dict[tuple[str, ...], list[Usage]] = {}
    for line in readme_block(README.read_text()):
        for usage in usages(line):
            found.setdefault(usage.path, []).append(usage)
    return found


def test_the_notation_reads_as_argparse_writes_it() -> None:
    """The reader of the block itself: alternatives, shared tails, flags and values."""
    jobs_status, jobs_stop = usages("distmarl jobs {status ID [--json] | stop ID} [--address U]")
    assert (jobs_status.path, jobs_status.positionals) == (("jobs", "status"), ["ID"])
    assert [(o.name, o.value) for o in jobs_status.options] == [
        ("--json", None), ("--address", "U")]
    assert [o.name for o in jobs_stop.options] == ["--address"]
    assert [u.path for u in usages("distmarl config schema | reference")] == [
        ("config", "schema"), ("config", "reference")]
    (train,) = usages("distmarl train CONFIG [--address ADDR | --local] [--set key=value ...]")
    assert train.positionals == ["CONFIG"] and not train.stray
    assert [(o.name, o.value, o.optional) for o in train.options] == [
        ("--address", "ADDR", True), ("--local", None, True), ("--set", "key=value", True)]
    block = "```bash\ndistmarl a B  # note\n    [--c D]\n```\n"
    assert readme_block(block) == ["distmarl a B [--c D]"]


def test_every_command_of_the_cli_is_in_the_readme(
        cli: dict[tuple[str, ...], Command], readme: dict[tuple[str, ...], list[Usage]]) -> None:
    missing = [show(p) for p, c in cli.items() if c.is_leaf and p not in readme]
    assert not missing, f"README.md's command block lacks {', '.join(missing)}"


def test_every_command_of_the_readme_is_in_the_cli(
        cli: dict[tuple[str, ...], Command], readme: dict[tuple[str, ...], list[Usage]]) -> None:
    unknown = [show(p) for p in readme if p not in cli]
    assert not unknown, f"README.md's command block names {', '.join(unknown)}, not in the CLI"


def test_options_match(cli: dict[tuple[str, ...], Command],
                       readme: dict[tuple[str, ...], list[Usage]]) -> None:
    """Each command's options (``distmarl --version`` too), both ways: every option the parser
    takes is in the README under one of its names, and every option the README names is the
    parser's."""
    problems = []
    for path in dict.fromkeys([*cli, *readme]):
        if path not in cli:
            continue  # test_every_command_of_the_readme_is_in_the_cli
        takes = cli[path].options
        named = {o.name for u in readme.get(path, []) for o in u.options}
        problems += [f"README.md names `{show(path)} {name}`, which the CLI does not take"
                     for name in sorted(named - takes.keys())]
        problems += [f"README.md lacks `{show(path)} {action.option_strings[-1]}` "
                     f"({action.help or 'no help text'})"
                     for action in dict.fromkeys(takes.values())
                     if not named & set(action.option_strings)]
    assert not problems, "\n".join(problems)


def test_option_values_match(cli: dict[tuple[str, ...], Command],
                             readme: dict[tuple[str, ...], list[Usage]]) -> None:
    """A flag stands alone, an option that takes a value shows one (its choices, if it has
    them, as ``a|b``), and only a required option stands outside brackets."""
    problems = []
    for path, found in readme.items():
        for option in (o for u in found for o in u.options):
            action = cli[path].options.get(option.name) if path in cli else None
            if action is None:
                continue  # test_options_match
            where = f"`{show(path)} {option.name}`"
            if action.nargs == 0 and option.value is not None:
                problems.append(f"README.md gives {where} a value ({option.value}); it is a flag")
            if action.nargs != 0 and option.value is None:
                problems.append(f"README.md shows {where} as a flag; it takes a value")
            if action.choices is not None and option.value is not None \
                    and set(option.value.split("|")) != {str(c) for c in action.choices}:
                problems.append(f"README.md lists {where} {option.value}; its choices are "
                                f"{'|'.join(map(str, action.choices))}")
            alone = isinstance(action, argparse._VersionAction)  # `distmarl --version`
            if option.optional == action.required and not alone:
                problems.append(f"README.md shows {where} as "
                                f"{'optional' if option.optional else 'required'}; it is not")
    assert not problems, "\n".join(problems)


def test_positionals_match(cli: dict[tuple[str, ...], Command],
                           readme: dict[tuple[str, ...], list[Usage]]) -> None:
    """Each command's positional arguments, by name (the parser's metavar, else its dest in
    capitals) and in order, and no word the notation does not read."""
    problems = []
    for path, found in readme.items():
        for usage in found:
            if path in cli and usage.positionals != cli[path].positionals:
                problems.append(f"README.md: `{show(path)} {' '.join(usage.positionals)}`; the "
                                f"CLI takes `{show(path)} {' '.join(cli[path].positionals)}`")
            if usage.stray:
                problems.append(f"README.md: `{show(path)}` has words the block's notation "
                                f"does not read: {usage.stray}")
    assert not problems, "\n".join(problems)
