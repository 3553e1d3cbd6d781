"""Graphs as Graphviz ``dot`` or Mermaid text (closure and diff draw theirs with it).

``closure --format dot|mermaid`` draws which output references which (an edge per pair,
labelled by how: runpath, symlink, pkgconfig, nix-support, text); ``diff --format ...`` draws
what moved between two releases (an edge per pair of package outputs, labelled with the
number of members). The text is the same for the same input: nodes and edges are sorted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["FORMATS", "Graph"]

FORMATS = ("dot", "mermaid")
# Node styles: (Graphviz attributes, Mermaid classDef body).
_STYLES = {
    "warn": ('color="#b35900", style=filled, fillcolor="#ffe6cc"', "fill:#ffe6cc,stroke:#b35900"),
    "added": ('color="#1a7f37", style=filled, fillcolor="#dafbe1"', "fill:#dafbe1,stroke:#1a7f37"),
    "removed": ('color="#cf222e", style=filled, fillcolor="#ffebe9"',
                "fill:#ffebe9,stroke:#cf222e"),
}


@dataclass(slots=True)
class Graph:
    """Nodes (id -> label lines, style) and labelled edges, drawn left to right."""

    title: str
    nodes: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    edges: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def node(self, ident: str, *lines: str, style: str = "") -> None:
        label, old = self.nodes.get(ident, ([ident], ""))
        self.nodes[ident] = ([*label, *lines], style or old)

    def edge(self, source: str, target: str, label: str = "") -> None:
        self.node(source)
        self.node(target)
        labels = self.edges.setdefault((source, target), [])
        if label and label not in labels:
            labels.append(label)

    def render(self, fmt: str) -> str:
        """``dot`` (Graphviz) or ``mermaid`` text; ValueError for another format."""
        if fmt == "dot":
            return self._dot()
        if fmt == "mermaid":
            return self._mermaid()
        raise ValueError(f"unknown graph format {fmt!r} (known: {', '.join(FORMATS)})")

    def _dot(self) -> str:
        lines = [f"digraph {_dot_string(self.title)} {{", "  rankdir=LR;",
                 '  node [shape=box, fontname="sans-serif"];']
        for ident, (label, style) in sorted(self.nodes.items()):
            extra = f", {_STYLES[style][0]}" if style else ""
            lines.append(f"  {_dot_string(ident)} [label={_dot_string(chr(10).join(label))}"
                         f"{extra}];")
        for (source, target), labels in sorted(self.edges.items()):
            text = f" [label={_dot_string(', '.join(labels))}]" if labels else ""
            lines.append(f"  {_dot_string(source)} -> {_dot_string(target)}{text};")
        return "\n".join([*lines, "}"]) + "\n"

    def _mermaid(self) -> str:
        ids = {ident: f"n{index}" for index, ident in enumerate(sorted(self.nodes))}
        lines = [f"%% {self.title}", "flowchart LR"]
        for ident, (label, _style) in sorted(self.nodes.items()):
            lines.append(f'  {ids[ident]}["{"<br/>".join(_mermaid_text(x) for x in label)}"]')
        for (source, target), labels in sorted(self.edges.items()):
            text = _mermaid_text(", ".join(labels)).replace("|", "#124;")
            arrow = f"-->|{text}|" if labels else "-->"
            lines.append(f"  {ids[source]} {arrow} {ids[target]}")
        for style, (_dot, css) in _STYLES.items():
            members = [ids[i] for i, (_l, s) in sorted(self.nodes.items()) if s == style]
            if members:
                lines += [f"  classDef {style} {css}", f"  class {','.join(members)} {style}"]
        return "\n".join(lines) + "\n"


def _dot_string(text: str) -> str:
    # Graphviz strings take C escapes; json.dumps gives \" \\ and \n, which dot reads alike.
    return json.dumps(text)


def _mermaid_text(text: str) -> str:
    """Mermaid labels are HTML-ish: quotes and angle brackets as entity codes."""
    return re.sub(r'["<>]', lambda m: f"#{ord(m.group())};", text)
