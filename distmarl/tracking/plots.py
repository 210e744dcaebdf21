"""PNG plots of a run made with matplotlib (Agg): fitness over generations, the family tree, and
a league's win-rate matrix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    """pyplot on the Agg backend, imported at the first plot: matplotlib's import is a large
    share of a process's start-up, and most processes that import this module never plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fitness(history: Sequence[Sequence[float]], path: Path,
                 title: str = "Fitness of every member",
                 ylabel: str = "fitness (mean evaluation score)",
                 references: Mapping[str, float] | None = None) -> Path:
    """``history[generation][member]`` -> one line per member over generations; a league's
    ``references`` (name -> rating) as dashed horizontal lines."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if history:
        members = len(history[0])
        for m in range(members):
            ax.plot(range(len(history)), [g[m] for g in history], marker="o", label=f"member {m}")
    for name, value in (references or {}).items():
        ax.axhline(value, linestyle="--", color="grey", linewidth=1)
        ax.annotate(name, (0, value), textcoords="offset points", xytext=(2, 3), fontsize=7,
                    color="dimgrey")
    if history:
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel("generation")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_win_rates(players: Sequence[str], win_rates: Any, path: Path,
                   title: str = "Win rate of each row player against each column player"
                   ) -> Path:
    """A heat map of ``win_rates`` ``(n, n)`` (row player's score rate against the column
    player, draws half), each cell labelled with its value."""
    n = len(players)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * n, 1.0 + 0.55 * n), dpi=100)
    image = ax.imshow(win_rates, vmin=0.0, vmax=1.0, cmap="RdYlGn")
    ax.set_xticks(range(n), players, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(n), players, fontsize=8)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{win_rates[i][j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.046)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_family_tree(lineage: Mapping[str, Any], path: Path) -> Path:
    """The population's family tree from ``Lineage.to_json()``: one node per individual at
    (generation, member), an edge from parent to child labelled with the mutation."""
    individuals = [{**i, "member": _member_of(i)} for i in lineage["individuals"]]
    by_id = {i["id"]: i for i in individuals}
    generations = max((i["generation"] for i in individuals), default=0)
    members = max((i["member"] for i in individuals), default=0) + 1
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * (generations + 2)), max(3, 0.9 * members + 1)),
                           dpi=100)
    for ind in individuals:
        parent = by_id.get(ind["parent_id"]) if ind["parent_id"] is not None else None
        if parent is not None:
            x0, y0, x1, y1 = parent["generation"], parent["member"], ind["generation"], ind["member"]
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                        arrowprops={"arrowstyle": "->", "color": "grey", "lw": 0.8})
            ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.12, ind["mutation"], fontsize=6,
                    ha="center", color="tab:blue")
    current = set(lineage.get("current", []))
    for ind in individuals:
        best = max(ind["fitness"]) if ind["fitness"] else None
        colour = "tab:green" if ind["id"] in current else "tab:grey"
        ax.scatter([ind["generation"]], [ind["member"]], s=120, color=colour, zorder=3)
        label = f"#{ind['id']}" + (f"\n{best:.1f}" if best is not None else "")
        ax.text(ind["generation"], ind["member"] - 0.3, label, fontsize=6, ha="center", va="top")
    ax.set_xlabel("generation")
    ax.set_ylabel("member")
    ax.set_yticks(range(members))
    ax.set_xlim(-0.5, generations + 0.5)
    ax.set_ylim(members - 0.3, -0.7)
    ax.set_title("Family tree (green: alive; label: id and best fitness)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _member_of(individual: Mapping[str, Any]) -> int:
    """The population member an individual lived in."""
    return int(individual["member"])
