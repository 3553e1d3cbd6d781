#!/usr/bin/env python3
"""Draw cudasplit's module picture from the code: a Mermaid graph of the package's own imports,
plus each module's one job (the first line of its docstring), line count and largest class.

    python3 scripts/module_graph.py            # print the Markdown block
    python3 scripts/module_graph.py --write    # replace the generated part of docs/architecture.md
    python3 scripts/module_graph.py --check    # fail if docs/architecture.md is out of date

Only the standard library (``ast``): no pydeps, nothing imported or executed.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cudasplit"
DOC = ROOT / "docs" / "architecture.md"
# The split run's own modules: drawn apart first, so the flow is readable without the rest.
SPLIT_RUN = (
    "_pipeline", "_prepare", "_layout", "_classify", "_place", "_placements", "_links",
    "_linkresolve", "_rewrites", "_copies", "_checks", "_endrun", "_patchstage", "_elfplan",
    "_elfjob", "_elfcontext", "_splitoptions", "_reportwriter", "_outcomes",
    "sinks._base", "sinks._staged", "sinks._placement", "sinks._promote", "sinks._directory",
    "sinks._memory", "sinks._tarball", "sinks._tarpack")
# Families, for the picture of every module: each module belongs to the first family whose
# pattern matches (fnmatch on the dotted name). A module in no family is drawn apart and
# fails ``tests/test_architecture.py``: a new module has to say where it belongs.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("public face", ("__init__", "__main__", "errors", "cli", "cli.*", "_api*")),
    ("split loop", ("_pipeline", "_prepare", "_layout", "_classify", "_place*", "_link*",
                    "_outcomes", "_rewrites", "_copies", "_checks", "_endrun", "_report*",
                    "_splitoptions", "_libmajor", "_patchstage*", "_elfjob*", "_elfcontext",
                    "_options", "_progress*", "_targets")),
    ("sinks", ("sinks", "sinks.*")),
    ("sources and codecs", ("_sources*", "_source_*", "_codec*", "_tar*", "_xz*", "_zstd*",
                            "_dirsource*", "_limits*", "_member*")),
    ("ELF", ("_elf*", "_patch*", "_runpath*", "_resolve*", "_dlopen*", "_ldd*", "_sonames*",
             "_lief*", "_interp*", "_needed*", "_dynamic*", "_segment*", "_verify*")),
    ("rules and package table", ("_rules*", "_rule*", "_gates", "_pkgtable*", "_pkg*", "_globs",
                                 "_textedits", "_nvccprofile", "_model", "_where*")),
    ("Nix", ("_nix*",)),
    ("toolkit view", ("_toolkit*",)),
    ("release tools", ("_manifest*", "_features*", "_closure*", "_diff*", "_repack*",
                       "_relreport", "_release*", "_snapshot",
                       "_zipmembers")),
)
BEGIN = "<!-- module-graph: begin (scripts/module_graph.py --write) -->"
END = "<!-- module-graph: end -->"


@dataclass(frozen=True)
class Module:
    name: str                 # dotted, without the "cudasplit." prefix
    lines: int
    job: str
    imports: frozenset[str]
    typing_only: frozenset[str]   # imported under ``if TYPE_CHECKING:`` (drawn dashed)
    largest_class: tuple[str, int] | None


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts) or "__init__"


def resolve(current: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The package modules a ``from X import Y`` names (Y may be a module itself)."""
    if node.level == 0:
        if not (node.module or "").startswith("cudasplit"):
            return []
        base = (node.module or "").split(".")[1:]
    else:
        here = [] if current == "__init__" else current.split(".")
        package = here if is_package else here[:-1]
        base = package[: len(package) - (node.level - 1)] + (node.module or "").split(".")
        base = [b for b in base if b]
    return [".".join([*base, alias.name]) for alias in node.names] + [".".join(base)]


def read(path: Path, known: set[str]) -> Module:
    text = path.read_text()
    tree = ast.parse(text)
    name = module_name(path)
    imports: set[str] = set()
    typing: set[str] = set()
    guarded = {id(n) for block in ast.walk(tree) if _is_type_checking(block)
               for n in ast.walk(block)}
    for node in ast.walk(tree):
        found: list[str] = []
        if isinstance(node, ast.ImportFrom):
            found = resolve(name, path.name == "__init__.py", node)
        elif isinstance(node, ast.Import):
            found = [a.name.split(".", 1)[1] for a in node.names
                     if a.name.startswith("cudasplit.")]
        (typing if id(node) in guarded else imports).update(found)
    doc = (ast.get_docstring(tree) or "").strip().splitlines()
    classes = [(n.name, (n.end_lineno or n.lineno) - n.lineno + 1)
               for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    largest = max(classes, key=lambda c: c[1]) if classes else None
    own = frozenset(i for i in imports if i in known and i != name)
    typed = frozenset(i for i in typing if i in known and i != name) - own
    return Module(name, len(text.splitlines()), doc[0] if doc else "(no docstring)", own,
                  typed, largest)


def _is_type_checking(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING")


def modules() -> list[Module]:
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(p) for p in paths}
    return [read(p, known) for p in paths]


def family(name: str) -> str | None:
    for title, patterns in FAMILIES:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return title
    return None


def cycles(mods: list[Module]) -> list[list[str]]:
    """Import cycles (strongly connected components of more than one module, or a module
    importing itself), counting every import that runs, lazy ones inside functions too."""
    graph = {m.name: sorted(m.imports) for m in mods if m.name not in ("__init__", "__main__")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the package is small enough for recursion
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return sorted(found)


def node_id(name: str) -> str:
    return "m_" + name.replace(".", "_")


def mermaid(mods: list[Module], only: tuple[str, ...] | None = None) -> list[str]:
    shown = [m for m in mods if only is None or m.name in only]
    names = {m.name for m in shown}
    lines = ["```mermaid", "flowchart LR"]
    if only is None:
        lines += _family_blocks(shown)
    else:
        lines += [f'  {node_id(mod.name)}["{mod.name}"]' for mod in shown]
    for mod in shown:
        if mod.name in ("__init__", "__main__"):
            continue  # the facade imports everything; drawing it hides the structure
        for target in sorted(mod.imports & names):
            lines.append(f"  {node_id(mod.name)} --> {node_id(target)}")
        for target in sorted(mod.typing_only & names):
            lines.append(f"  {node_id(mod.name)} -.-> {node_id(target)}")
    lines.append("```")
    return lines


def _family_blocks(mods: list[Module]) -> list[str]:
    lines: list[str] = []
    titles = [title for title, _ in FAMILIES] + [None]
    for number, title in enumerate(titles):
        members = [m for m in mods if family(m.name) == title]
        if not members:
            continue
        lines.append(f'  subgraph f{number}["{title or "no family"}"]')
        lines += [f'    {node_id(m.name)}["{m.name}"]' for m in members]
        lines.append("  end")
    return lines


def table(mods: list[Module]) -> list[str]:
    lines = ["| module | lines | largest class | one job |", "|---|---:|---|---|"]
    for mod in mods:
        cls = f"{mod.largest_class[0]} ({mod.largest_class[1]})" if mod.largest_class else ""
        job = mod.job.replace("|", "\\|")
        lines.append(f"| `{mod.name}` | {mod.lines} | {cls} | {job} |")
    return lines


def limits(mods: list[Module], max_lines: int = 300, max_class: int = 150) -> list[str]:
    over = [f"`{m.name}` ({m.lines} lines)" for m in mods if m.lines > max_lines]
    big = [f"`{m.name}.{m.largest_class[0]}` ({m.largest_class[1]} lines)" for m in mods
           if m.largest_class and m.largest_class[1] > max_class]
    loops = ["(" + " → ".join(c) + ")" for c in cycles(mods)]
    return [f"Modules over {max_lines} lines: {', '.join(over) or 'none'}.", "",
            f"Classes over {max_class} lines: {', '.join(big) or 'none'}.", "",
            f"Import cycles: {', '.join(loops) or 'none'}."]


def generated() -> str:
    mods = modules()
    body = [BEGIN, "", "The split run's modules:", "", *mermaid(mods, SPLIT_RUN), "",
            "Every module:", "", *mermaid(mods), "", *table(mods), "", *limits(mods), "", END]
    return "\n".join(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    block = generated()
    if not (args.write or args.check):
        print(block)
        return 0
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    updated = text[:start] + block + text[end:]
    if args.check:
        if updated != text:
            print(f"{DOC} is out of date: run scripts/module_graph.py --write", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(updated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
