"""``diff --format dot|mermaid``: what moved between two releases, as a graph of package
outputs (see :mod:`cudasplit._closuregraph` for the drawing)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ._closuregraph import Graph
from ._reportwords import plural

if TYPE_CHECKING:
    from ._diff import ReleaseDiff

__all__ = ["diff_graph"]


def diff_graph(diff: ReleaseDiff) -> Graph:
    """A node per package output that changed (its size, members added and removed; new
    ones green, gone ones red) and an edge per pair of outputs members moved between,
    labelled with how many."""
    graph = Graph(f"{diff.old} -> {diff.new}")
    moved: Counter[tuple[str, str]] = Counter()
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    for c in diff.changes:
        if c.what in ("member-moved", "package-moved"):
            moved[(c.old, c.new)] += 1
        elif c.what == "relocated":
            moved[(c.old, ":".join(c.new.split(":")[:2]))] += 1
        elif c.what == "member-added":
            added[f"{c.package}:{c.new}"] += 1
        elif c.what == "member-removed":
            removed[f"{c.package}:{c.old}"] += 1
        elif c.what in ("output-added", "output-removed"):
            graph.node(f"{c.package}:{c.path}", c.what.replace("-", " "),
                       style=c.what.split("-")[1])
        elif c.what in ("package-added", "package-removed"):
            graph.node(c.package, f"{c.what.replace('-', ' ')} {c.old or c.new}",
                       style=c.what.split("-")[1])
        elif c.what == "version":
            graph.node(c.package, f"{c.old} -> {c.new}")
    for package, outputs in diff.sizes.items():
        for output, (before, after) in outputs.items():
            if before != after:
                graph.node(f"{package}:{output}", f"{before:,} -> {after:,} bytes")
    for node, count in sorted(added.items()):
        graph.node(node, f"+{plural(count, 'member')}")
    for node, count in sorted(removed.items()):
        graph.node(node, f"-{plural(count, 'member')}")
    for (source, target), count in sorted(moved.items()):
        graph.edge(source, target, plural(count, "member"))
    return graph
