"""The closure scan: one pass over every output's bytes, each reference attributed to its cause.

A reference is attributed to how it got there:

* ``symlink``   a link whose target (absolute, or relative and leaving its output) lands in
  another output;
* ``runpath``   an ELF file whose DT_RUNPATH/DT_RPATH names another output;
* ``pkgconfig`` a ``.pc`` file; ``nix-support`` a file under ``nix-support/``;
* ``text``      any other occurrence of the root in a file's bytes (what Nix's scanner finds).

Needles: in ``/nix/store`` the root up to its hash (``/nix/store/<hash>``), so a reference to
any path inside the output counts, as in Nix; elsewhere the root path itself. In the store,
every other ``/nix/store/<hash>-<name>`` in the bytes is listed as an external reference (a
dependency's output), so own plus external references are what ``nix-store -q --references``
lists. Nix also counts a bare hash without the ``/nix/store/`` prefix (and only hashes of the
build's inputs); such references are not seen here.

The same walk counts the files and bytes of a finished split's outputs (:func:`measure_outputs`,
what ``cudasplit split`` prints), so the two numbers always agree.
"""

from __future__ import annotations

import mmap
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cudasplit._argcheck import checked
from cudasplit._elf.read import ELF_MAGIC, read_elf_info
from cudasplit._report import Report
from cudasplit.errors import ElfError, OutputError

__all__ = ["COMPILERS", "STORE_ROOT", "ClosureScanner", "OutputSize", "Reference",
           "measure_outputs"]

STORE_ROOT = re.compile(r"^(/nix/store/[0-9a-df-np-sv-z]{32})-[^/]+$")
_STORE_PATH = re.compile(rb"/nix/store/[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+._?=-]+")
_MAX_STORE_PATH = 11 + 32 + 1 + 211  # /nix/store/ + hash + - + the longest name Nix allows
COMPILERS = frozenset({"nvcc", "ptxas", "cicc", "nvlink", "fatbinary", "cudafe++", "bin2c",
                       "nvdisasm", "cuobjdump", "nvptxcompiler", "libnvptxcompiler_static.a"})


@dataclass(frozen=True, slots=True, order=True)
class Reference:
    """``source`` output's ``path`` names ``target`` output (``via`` says how)."""

    source: str
    target: str
    via: str  # symlink | runpath | pkgconfig | nix-support | text
    path: str


@dataclass(frozen=True, slots=True)
class OutputSize:
    """One output's size in a closure report.

    Attributes:
        files: how many files and symlinks.
        bytes: their bytes (a symlink counts its target's length).
        holds: category (``static``, ``stubs``, ``compiler``, ...) -> one path holding it.

    Raises:
        Nothing: a value.
    """

    files: int
    bytes: int
    holds: dict[str, str] = field(default_factory=dict)  # category -> one example path


class ClosureScanner:
    """One pass over every output; collects references into ``self.references``."""

    def __init__(self, roots: dict[str, str]) -> None:
        self.roots = roots
        self.on_file: Callable[[str, int], None] | None = None  # (path, bytes): progress
        self.needles = {name: _needle(root).encode() for name, root in roots.items()}
        # A store hash is unique whatever follows it (``-name/lib``); a directory path is not.
        self.bounded = {name: STORE_ROOT.match(root) is None for name, root in roots.items()}
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
            if self.on_file is not None:
                self.on_file(f"{name}/{rel}",
                             len(link) if link is not None else os.path.getsize(full))
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
    match = STORE_ROOT.match(root)
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
    elif link is not None and "stubs" in link.split("/")[:-1]:
        # lib/libcuda.so -> stubs/libcuda.so: a stub found by name next to the real
        # libraries (NixOS/nixpkgs#293320), whatever output holds it.
        yield "stub-link"
    if output == "samples" or parts[0] == "samples":
        yield "samples"
    if output == "doc" or parts[0] == "doc" or rel.startswith(("share/doc/", "share/man/")):
        yield "doc"
    if name in COMPILERS:
        yield "compiler"


@checked
def measure_outputs(report: Report) -> dict[str, tuple[int, int]]:
    """``(files, bytes)`` of each output directory of a finished split, counted as
    :func:`closure_of` counts: every non-directory (symlinks and ``nix-support`` files
    too), a symlink by the length of its target, a file by its size on disk after patching.

    Args:
        report: the report of a split that wrote its outputs (not a dry run).

    Returns:
        Output name -> (files, bytes); outputs whose directory is missing (a dry run, a
        directory removed since) are left out.

    Raises:
        Nothing: an entry that cannot be read counts as zero bytes.
    """
    sizes: dict[str, tuple[int, int]] = {}
    for name, record in report.outputs.items():
        if not os.path.isdir(record.directory):
            continue
        files = total = 0
        for _rel, full in _walk(record.directory):
            files += 1
            try:
                total += len(os.readlink(full)) if os.path.islink(full) else \
                    os.path.getsize(full)
            except OSError:
                continue
        sizes[name] = (files, total)
    return sizes
