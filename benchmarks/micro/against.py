"""Measure this tree against another commit's worktree: a probe (Python code that prints one
JSON line of figures) run in fresh processes of each tree, alternating, so the machine's drift
falls on both alike.

The probe gets the measured tree's path as ``sys.argv[1]`` (it puts it first on ``sys.path``)
and the caller's arguments after it; :data:`PRELUDE` is the start probes share.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: what every probe starts with: the measured tree first on the path, one torch thread, and
#: ``rate(step, n, per_call)``: calls of ``step`` per second after one warm-up call, times
#: ``per_call``
PRELUDE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)

def rate(step, n, per_call):
    step()
    start = time.perf_counter()
    for _ in range(n):
        step()
    return per_call * n / (time.perf_counter() - start)
"""


def probe(code: str, tree: Path, args: Sequence[str]) -> dict[str, float]:
    """One fresh process of ``code`` in the tree at ``tree``: its JSON line."""
    out = subprocess.run([sys.executable, "-c", code, str(tree), *args], capture_output=True,
                         text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(code: str, baseline: Path, rounds: int, args: Sequence[str], show: bool = True
              ) -> dict[str, list[dict[str, float]]]:
    """``rounds`` runs of ``code`` in each tree, the baseline's first in each round; per side
    (``baseline``, ``this``), each round's figures (printed as they come with ``show``)."""
    sides: dict[str, list[dict[str, float]]] = {"baseline": [], "this": []}
    for r in range(rounds):
        for side, tree in (("baseline", baseline), ("this", ROOT)):
            figures = probe(code, tree.resolve(), args)
            sides[side].append(figures)
            if show:
                print(f"round {r + 1} {side}: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    return sides
