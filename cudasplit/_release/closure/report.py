"""Closure report: how big each output is and which other outputs it keeps alive.

A Nix output's runtime closure is every store path whose name (hash) occurs in its bytes, found
by a plain byte scan over every file and symlink. The same scan works on a split directory
(``DIR/<output>/``) with the output roots' absolute paths as the needles, so a maintainer sees
the closure before anything reaches a store. The scan, how each reference is attributed
(symlink, runpath, pkgconfig, nix-support, text) and what the needles are, is
:mod:`cudasplit._release.closure.scan`; here are the report, its sizes and its warnings.

Warnings: static archives, stubs, a link outside a stubs directory to a stub (``stub-link``:
``lib/libcuda.so -> stubs/libcuda.so``, NixOS/nixpkgs#293320), samples, documentation or a
compiler (nvcc, ptxas, cicc, ...) reachable from ``lib`` or ``out``. ``out``'s
``nix-support/propagated-build-inputs`` names every other output on purpose (a dependency on
``out`` brings the whole package to a build); those edges are reported but not followed for
``out``'s warnings, since they are the convention, not an accident of the split.

What ``out`` holds itself is never a warning, except a stub link: a single-output package
(cuda_cudart and cuda_nvcc in Nixpkgs, or any split with ``--outputs out``) keeps its static
archives, stubs and compiler in ``out`` on purpose ("CMake expects the static libraries to
exist alongside the dynamic libraries"), and there is no other output to move them to. The
warnings are about what an output *drags along* from other outputs, and about ``lib``, which
is meant to be small whatever the package. A stub link stays a warning everywhere: it makes
the loader find the stub instead of the driver.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cudasplit._model import OUTPUT_NAMES
from cudasplit._release.closure.scan import ClosureScanner, OutputSize, Reference
from cudasplit._release.graph import Graph
from cudasplit._run import ProgressCallback, Tally
from cudasplit._words import plural
from cudasplit.errors import OutputError

__all__ = ["ClosureReport", "ClosureWarning", "Reference", "closure_of_dir", "closure_of_roots"]

# Categories an output may hold that a runtime library should never drag along.
HEAVY = ("static", "stubs", "stub-link", "samples", "doc", "compiler")
# Outputs whose closure should stay small; out's propagation list is exempt (see module text).
WATCHED = ("lib", "out")
PROPAGATION = "nix-support/propagated-build-inputs"
CLOSURE_SCHEMA = 1  # the "schema" of as_dict (cudasplit/schemas/closure.json)


@dataclass(frozen=True, slots=True, order=True)
class ClosureWarning:
    """Something ``lib`` or ``out`` should not drag along that its closure holds.

    Attributes:
        output: ``lib`` or ``out``: whose closure holds it.
        category: ``static``, ``stubs``, ``stub-link``, ``samples``, ``doc`` or ``compiler``.
        holder: the output that holds it.
        example: one path inside ``holder``, for the message.
        chain: the outputs from ``output`` to ``holder``, each referencing the next.

    Raises:
        Nothing: a value.
    """

    output: str    # lib or out: whose closure holds it
    category: str  # static | stubs | stub-link | samples | doc | compiler
    holder: str    # the output that holds it
    example: str   # one path inside holder, for the message
    chain: tuple[str, ...]  # output -> ... -> holder

    def __str__(self) -> str:
        route = " -> ".join(self.chain)
        return (f"{self.output} reaches {self.category} ({self.holder}:{self.example}) "
                f"via {route}")


@dataclass(frozen=True, slots=True)
class ClosureReport:
    """What :func:`closure_of` found: each output's size, what it references, and the warnings.

    Attributes:
        roots: output name -> its directory (or store path).
        sizes: output name -> its files, bytes and what it holds (:class:`OutputSize`).
        references: which output names which, and how (sorted; self references left out).
        warnings: what ``lib`` or ``out`` drags along that it should not.
        external: store roots only: the other store paths each output names.

    Raises:
        Nothing: a value (``draw`` raises ValueError for an unknown format).
    """

    roots: dict[str, str]
    sizes: dict[str, OutputSize]
    references: tuple[Reference, ...]  # sorted, self references left out
    warnings: tuple[ClosureWarning, ...]
    # Store roots only: other store paths each output names (dependencies' outputs).
    external: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def edges(self, *, skip_propagation_of: str | None = None) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {name: set() for name in self.roots}
        for ref in self.references:
            if ref.source == skip_propagation_of and ref.path == PROPAGATION:
                continue
            out[ref.source].add(ref.target)
        return out

    def referenced(self, output: str) -> set[str]:
        return self.edges()[output]

    def closure_bytes(self, output: str) -> int:
        """Bytes of ``output`` and everything it reaches (its runtime closure in Nix)."""
        return sum(self.sizes[name].bytes for name in _reach(self.edges(), output))

    def as_dict(self) -> dict[str, Any]:
        edges = self.edges()
        return {
            "schema": CLOSURE_SCHEMA,
            "outputs": {
                name: {"root": self.roots[name], "files": size.files, "bytes": size.bytes,
                       "closure_bytes": self.closure_bytes(name), "holds": size.holds,
                       "references": sorted(edges[name]),
                       "external": list(self.external.get(name, ()))}
                for name, size in sorted(self.sizes.items(), key=_output_order)
            },
            "references": [asdict(r) for r in self.references],
            "warnings": [{**asdict(w), "chain": list(w.chain), "message": str(w)}
                         for w in self.warnings],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2) + "\n"

    def draw(self, fmt: str) -> str:
        """Which output references which, as Graphviz ``dot`` or ``mermaid`` text (ValueError
        for another format)."""

        return closure_graph(self).render(fmt)

    def text_lines(self) -> list[str]:
        """One line per output (files, bytes, closure bytes, what it references), the name
        column as wide as the longest name (conda packages' names are long). The warnings
        are not among them: each is ``str()`` of an item of :attr:`warnings`, printed by
        the command line as a warning."""
        lines = []
        width = max((len(name) for name in self.sizes), default=0)
        for name, size in sorted(self.sizes.items(), key=_output_order):
            refs = sorted(self.referenced(name), key=_order_key)
            lines.append(f"{name:{max(width, 8)}} {plural(size.files, 'file'):>12} "
                         f"{size.bytes:>14,} bytes  closure {self.closure_bytes(name):>14,}  -> "
                         + (", ".join(f"{t} ({_vias(self.references, name, t)})" for t in refs)
                            or "nothing"))
            lines.extend(f"{'':{max(width, 8)}} also {path}"
                         for path in self.external.get(name, ()))
        return lines


def _vias(references: tuple[Reference, ...], source: str, target: str) -> str:
    return ",".join(sorted({r.via for r in references if r.source == source
                            and r.target == target}))


def _order_key(name: str) -> tuple[int, str]:
    return (OUTPUT_NAMES.index(name) if name in OUTPUT_NAMES else len(OUTPUT_NAMES), name)


def _output_order(item: tuple[str, Any]) -> tuple[int, str]:
    return _order_key(item[0])


def closure_of_dir(split_dir: str | os.PathLike[str],
                   progress: ProgressCallback | None = None) -> ClosureReport:
    """The outputs of a split directory (``DIR/<output>/``, as ``split -o DIR`` writes it)."""
    base = Path(split_dir)
    if not base.is_dir():
        raise OutputError(f"{base}: not a directory")
    roots = {p.name: str(p.resolve()) for p in sorted(base.iterdir())
             if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")}
    unknown = sorted(set(roots) - set(OUTPUT_NAMES))
    if not roots or unknown:
        what = ("no output directories" if not unknown else f"{unknown[0]} is not an output name"
                if len(unknown) == 1 else f"{', '.join(unknown[:3])} are not output names")
        raise OutputError(f"{base}: not a split directory (DIR/<output>/...): {what}; for a "
                          "batch split give DIR/<pname>-<platform>-<version>")
    return closure_of_roots(roots, progress)


def closure_of_roots(roots: Mapping[str, str],
                     progress: ProgressCallback | None = None) -> ClosureReport:
    """Any output -> root mapping: a split directory's outputs or a derivation's store paths.
    ``progress`` hears of every file scanned."""
    scanner = ClosureScanner(dict(roots))
    tally = Tally(", ".join(sorted(roots)), progress)
    scanner.on_file = tally.add if progress is not None else None
    sizes = {name: scanner.scan_output(name) for name in roots}
    tally.done()
    references = tuple(sorted(set(scanner.references)))
    external = {name: tuple(sorted(paths)) for name, paths in scanner.external.items()}
    report = ClosureReport(dict(roots), sizes, references, ())
    return ClosureReport(report.roots, sizes, references, _warnings(report), external)


def _warnings(report: ClosureReport) -> tuple[ClosureWarning, ...]:
    found: list[ClosureWarning] = []
    for start in WATCHED:
        if start not in report.roots:
            continue
        edges = report.edges(skip_propagation_of=start if start == "out" else None)
        for holder, chain in _paths(edges, start).items():
            for category in HEAVY:
                example = report.sizes[holder].holds.get(category)
                if example is not None and not _expected(start, holder, category):
                    found.append(ClosureWarning(start, category, holder, example, chain))
    return tuple(sorted(found))


def _expected(start: str, holder: str, category: str) -> bool:
    """``out`` holding its own static archives, stubs or compiler is what a single-output
    package is (Nixpkgs' cuda_cudart and cuda_nvcc); a stub link is never expected."""
    return start == "out" and holder == "out" and category != "stub-link"


def _paths(edges: Mapping[str, set[str]], start: str) -> dict[str, tuple[str, ...]]:
    """Shortest chain from ``start`` to each output it reaches (itself included)."""
    chains: dict[str, tuple[str, ...]] = {start: (start,)}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges.get(node, ())):
                if target not in chains:
                    chains[target] = (*chains[node], target)
                    following.append(target)
        frontier = following
    return chains


def _reach(edges: Mapping[str, set[str]], start: str) -> set[str]:
    return set(_paths(edges, start))


def closure_graph(report: ClosureReport) -> Graph:
    """Outputs with their size and closure size; an edge per referencing pair, labelled by
    how; outputs holding what lib/out should not drag along (a closure warning) stand out."""
    graph = Graph("closure")
    warned = {w.holder for w in report.warnings}
    for name, size in report.sizes.items():
        graph.node(name, f"{plural(size.files, 'file')}, {plural(size.bytes, 'byte')}",
                   f"closure {report.closure_bytes(name):,} bytes",
                   style="warn" if name in warned else "")
    for ref in report.references:
        graph.edge(ref.source, ref.target, ref.via)
    for source, externals in report.external.items():
        for path in externals:
            graph.edge(source, _store_name(path), "text")
    return graph


def _store_name(path: str) -> str:
    """``/nix/store/<hash>-cuda_nvrtc-12.9-lib`` -> ``cuda_nvrtc-12.9-lib``."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"^[0-9a-z]{32}-", "", base)
