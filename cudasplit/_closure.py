"""Closure report: how big each output is and which other outputs it keeps alive.

A Nix output's runtime closure is every store path whose name (hash) occurs in its bytes, found
by a plain byte scan over every file and symlink. The same scan works on a split directory
(``DIR/<output>/``) with the output roots' absolute paths as the needles, so a maintainer sees
the closure before anything reaches a store. Each reference is attributed to how it got there:

* ``symlink``   a link whose target (absolute, or relative and leaving its output) lands in
  another output;
* ``runpath``   an ELF file whose DT_RUNPATH/DT_RPATH names another output;
* ``pkgconfig`` a ``.pc`` file; ``nix-support`` a file under ``nix-support/``;
* ``text``      any other occurrence of the root in a file's bytes (what Nix's scanner finds).

Warnings: static archives, stubs, samples, documentation or a compiler (nvcc, ptxas, cicc, ...)
reachable from ``lib`` or ``out``. ``out``'s ``nix-support/propagated-build-inputs`` names every
other output on purpose (a dependency on ``out`` brings the whole package to a build); those
edges are reported but not followed for ``out``'s warnings, since they are the convention, not
an accident of the split.

Needles: in ``/nix/store`` the root up to its hash (``/nix/store/<hash>``), so a reference to
any path inside the output counts, as in Nix; elsewhere the root path itself. In the store,
every other ``/nix/store/<hash>-<name>`` in the bytes is listed as an external reference (a
dependency's output), so own plus external references are what ``nix-store -q --references``
lists. Nix also counts a bare hash without the ``/nix/store/`` prefix (and only hashes of the
build's inputs); such references are not seen here.
"""

from __future__ import annotations

import json
import mmap
import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._elf import ELF_MAGIC, read_elf_info
from ._model import OUTPUT_NAMES
from .errors import ElfError, OutputError

__all__ = ["ClosureReport", "ClosureWarning", "Reference", "closure_of_dir", "closure_of_roots"]

_STORE_ROOT = re.compile(r"^(/nix/store/[0-9a-df-np-sv-z]{32})-[^/]+$")
_STORE_PATH = re.compile(rb"/nix/store/[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+._?=-]+")
_MAX_STORE_PATH = 11 + 32 + 1 + 211  # /nix/store/ + hash + - + the longest name Nix allows
COMPILERS = frozenset({"nvcc", "ptxas", "cicc", "nvlink", "fatbinary", "cudafe++", "bin2c",
                       "nvdisasm", "cuobjdump", "nvptxcompiler", "libnvptxcompiler_static.a"})
# Categories an output may hold that a runtime library should never drag along.
HEAVY = ("static", "stubs", "samples", "doc", "compiler")
# Outputs whose closure should stay small; out's propagation list is exempt (see module text).
WATCHED = ("lib", "out")
PROPAGATION = "nix-support/propagated-build-inputs"


@dataclass(frozen=True, slots=True, order=True)
class Reference:
    """``source`` output's ``path`` names ``target`` output (``via`` says how)."""

    source: str
    target: str
    via: str  # symlink | runpath | pkgconfig | nix-support | text
    path: str


@dataclass(frozen=True, slots=True, order=True)
class ClosureWarning:
    output: str    # lib or out: whose closure holds it
    category: str  # static | stubs | samples | doc | compiler
    holder: str    # the output that holds it
    example: str   # one path inside holder, for the message
    chain: tuple[str, ...]  # output -> ... -> holder

    def __str__(self) -> str:
        route = " -> ".join(self.chain)
        return (f"{self.output} reaches {self.category} ({self.holder}:{self.example}) "
                f"via {route}")


@dataclass(frozen=True, slots=True)
class OutputSize:
    files: int
    bytes: int
    holds: dict[str, str] = field(default_factory=dict)  # category -> one example path


@dataclass(frozen=True, slots=True)
class ClosureReport:
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

    def text_lines(self) -> list[str]:
        lines = []
        for name, size in sorted(self.sizes.items(), key=_output_order):
            refs = sorted(self.referenced(name), key=_order_key)
            lines.append(f"{name:8} {size.files:6} files {size.bytes:>14,} bytes  "
                         f"closure {self.closure_bytes(name):>14,}  -> "
                         + (", ".join(f"{t} ({_vias(self.references, name, t)})" for t in refs)
                            or "nothing"))
            lines.extend(f"{'':8} also {path}" for path in self.external.get(name, ()))
        lines.extend(f"warning: {w}" for w in self.warnings)
        return lines


def _vias(references: tuple[Reference, ...], source: str, target: str) -> str:
    return ",".join(sorted({r.via for r in references if r.source == source
                            and r.target == target}))


def _order_key(name: str) -> tuple[int, str]:
    return (OUTPUT_NAMES.index(name) if name in OUTPUT_NAMES else len(OUTPUT_NAMES), name)


def _output_order(item: tuple[str, Any]) -> tuple[int, str]:
    return _order_key(item[0])


# ---------------------------------------------------------------------------------------------
# Scanning


def closure_of_dir(split_dir: str | os.PathLike[str]) -> ClosureReport:
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
    return closure_of_roots(roots)


def closure_of_roots(roots: Mapping[str, str]) -> ClosureReport:
    """Any output -> root mapping: a split directory's outputs or a derivation's store paths."""
    scanner = _Scanner(dict(roots))
    sizes = {name: scanner.scan_output(name) for name in roots}
    references = tuple(sorted(set(scanner.references)))
    external = {name: tuple(sorted(paths)) for name, paths in scanner.external.items()}
    report = ClosureReport(dict(roots), sizes, references, ())
    return ClosureReport(report.roots, sizes, references, _warnings(report), external)


class _Scanner:
    """One pass over every output; collects references into ``self.references``."""

    def __init__(self, roots: dict[str, str]) -> None:
        self.roots = roots
        self.needles = {name: _needle(root).encode() for name, root in roots.items()}
        # A store hash is unique whatever follows it (``-name/lib``); a directory path is not.
        self.bounded = {name: _STORE_ROOT.match(root) is None for name, root in roots.items()}
        # Every needle of a split directory (or the store) starts alike: find that prefix with
        # memmem-speed ``find`` and test the few hits, instead of one search per output.
        self.prefix = os.path.commonprefix(list(self.needles.values()))  # noqa: RUF071 bytes
        # In the store, any other store path named in the bytes is a reference too (what
        # nix-store -q --references lists besides the package's own outputs).
        self.store = all(not bounded for bounded in self.bounded.values())
        if self.store:
            self.prefix = b"/nix/store/"
        self.references: list[Reference] = []
        self.external: dict[str, set[str]] = {name: set() for name in roots}
        self.current = ""

    def scan_output(self, name: str) -> OutputSize:
        root = self.roots[name]
        self.current = name
        files = total = 0
        holds: dict[str, str] = {}
        for rel, full in _walk(root):
            files += 1
            link = os.readlink(full) if os.path.islink(full) else None
            if link is not None:
                self._symlink(name, rel, full)
                total += len(link)
            else:
                total += os.path.getsize(full)
                self._file(name, rel, full)
            for category in _categories(name, rel, link):
                holds.setdefault(category, rel)
        return OutputSize(files, total, holds)

    def _symlink(self, name: str, rel: str, full: str) -> None:
        text = os.readlink(full)
        target = text if text.startswith("/") else posixpath.normpath(
            posixpath.join(self.roots[name], posixpath.dirname(rel), text))
        for hit in self._hits(text.encode()) | self._owner(target):
            self._add(name, hit, "symlink", rel)

    def _owner(self, target: str) -> set[str]:
        return {n for n, root in self.roots.items()
                if target == root or target.startswith(root + "/")}

    def _file(self, name: str, rel: str, full: str) -> None:
        hits = self._scan_bytes(full)
        if not hits:
            return
        via = self._via(rel, full, hits)
        for hit in hits:
            self._add(name, hit, via.get(hit, "text"), rel)

    def _via(self, rel: str, full: str, hits: set[str]) -> dict[str, str]:
        if rel.startswith("nix-support/"):
            return dict.fromkeys(hits, "nix-support")
        if rel.endswith(".pc"):
            return dict.fromkeys(hits, "pkgconfig")
        return {hit: "runpath" for hit in hits if hit in self._runpath_hits(full)}

    def _runpath_hits(self, full: str) -> set[str]:
        with open(full, "rb") as fh:
            if fh.read(4) != ELF_MAGIC:
                return set()
        try:
            info = read_elf_info(full)
        except ElfError:
            return set()
        if info is None:
            return set()
        return self._hits(f"{info.runpath or ''}:{info.rpath or ''}".encode())

    def _scan_bytes(self, full: str) -> set[str]:
        try:
            with open(full, "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return set()
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    return self._hits(data)
        except OSError as exc:
            raise OutputError(f"{full}: cannot read ({exc.strerror or exc})") from exc

    def _hits(self, data: bytes | mmap.mmap) -> set[str]:
        found: set[str] = set()
        if not self.prefix:
            return {n for n, needle in self.needles.items() if data.find(needle) >= 0}
        pos = data.find(self.prefix)
        while pos >= 0:
            own = {name for name, needle in self.needles.items()
                   if data[pos:pos + len(needle)] == needle
                   and (not self.bounded[name] or _ends(data, pos + len(needle)))}
            found |= own
            if self.store and not own:
                self._external(data[pos:pos + _MAX_STORE_PATH])
            pos = data.find(self.prefix, pos + 1)
        return found

    def _external(self, text: bytes) -> None:
        match = _STORE_PATH.match(text)
        if match is not None:
            self.external[self.current].add(match.group(0).decode())

    def _add(self, source: str, target: str, via: str, path: str) -> None:
        if source != target:
            self.references.append(Reference(source, target, via, path))


def _ends(data: bytes | mmap.mmap, end: int) -> bool:
    """A needle ends at a path boundary: ``/split/lib`` must not match ``/split/libfoo``."""
    if end >= len(data):
        return True
    return data[end:end + 1] not in _NAME_BYTES


# Characters that may continue a store-path name or a directory name in a split directory.
_NAME_BYTES = frozenset(bytes([c]) for c in
                        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-._?=")


def _needle(root: str) -> str:
    match = _STORE_ROOT.match(root)
    return match.group(1) if match else root.rstrip("/")


def _walk(root: str) -> Iterator[tuple[str, str]]:
    """(relative path, full path) of every non-directory, sorted, symlinks not followed."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        # A symlink to a directory is listed in dirnames; os.walk does not descend into it.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + links):
            full = os.path.join(dirpath, name)
            yield os.path.relpath(full, root), full


def _categories(output: str, rel: str, link: str | None) -> Iterator[str]:
    name = posixpath.basename(rel)
    parts = rel.split("/")
    # A link counts by what it points at: ``libfoo-compat.a -> libfoo.so.1`` is no archive.
    if name.endswith(".a") and (link is None or link.endswith(".a")):
        yield "static"
    if "stubs" in parts[:-1]:
        yield "stubs"
    if output == "samples" or parts[0] == "samples":
        yield "samples"
    if output == "doc" or parts[0] == "doc" or rel.startswith(("share/doc/", "share/man/")):
        yield "doc"
    if name in COMPILERS:
        yield "compiler"


# ---------------------------------------------------------------------------------------------
# Warnings


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
    """``out`` holding its own compiler is what single-output packages (cuda_nvcc) are."""
    return start == "out" and holder == "out" and category == "compiler"


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

