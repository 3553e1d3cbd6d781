"""GPU code per architecture and the glibc floor of one file (and its exported symbols).

One open, a few ``pread`` calls per section header, container and entry header; never a payload.
An ELF file's fatbinary sections and version needs are read; a static archive's members that are
ELF objects are each read for their fatbinaries (their version needs come only with linking).
What cannot be read is a problem string in the result: a damaged fatbin or version table is
reported, never raised, and never stops the rest of the file from being read. Entries are added
up as they come (:func:`summarise`), never listed; at most
:data:`~cudasplit._elf.read.bounds.MAX_PROBLEMS` problems are kept per file, and one more line
says how many were not. Every entry point takes ``stop``: a callable asked every few thousand
steps of any loop, which ends the read with :class:`~cudasplit._elf.read.bounds.Stopped` (an
``OSError``) once it returns true.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cudasplit._elf.read.archive import AR_MAGIC, iter_members
from cudasplit._elf.read.bounds import Problems, Stop, hand_back
from cudasplit._elf.read.const import ELF_MAGIC
from cudasplit._elf.read.fatbin import FATBIN_SECTIONS, FatbinEntry, disjoint, iter_entries
from cudasplit._elf.read.sections import Region, SectionTable, read_sections
from cudasplit._elf.read.symbols import (
    ExportedSymbol,
    VersionNeed,
    exported_symbols,
    version_floors,
    version_needs,
)

__all__ = ["MAX_ARCH_ROWS", "GpuCode", "Inside", "arch_key", "fatbin_entries", "read_exports",
           "read_inside", "summarise"]

MAX_ARCH_ROWS = 512     # distinct (kind, arch) rows kept per file; a hostile file has more
_KIND_ORDER = {"sass": 0, "ptx": 1, "ltoir": 2}
_ARCH = re.compile(r"^sm_(\d+)([a-z]*)$")


@dataclass(frozen=True, slots=True)
class GpuCode:
    """The GPU code of one kind and architecture in a file.

    Attributes:
        kind: ``sass``, ``ptx`` or ``ltoir``.
        arch: ``sm_80``, ``sm_90a``, ``sm_100f``.
        entries: how many fatbinary entries.
        stored: bytes they take in the file (headers and payloads as stored).
        size: their payloads unpacked.
        compressed: how many of them are stored compressed.

    Raises:
        Nothing: a value.
    """

    kind: str
    arch: str
    entries: int
    stored: int
    size: int
    compressed: int

    def as_dict(self) -> dict[str, int | str]:
        return {"kind": self.kind, "arch": self.arch, "entries": self.entries,
                "stored": self.stored, "size": self.size, "compressed": self.compressed}


@dataclass(frozen=True, slots=True)
class Inside:
    """What one file carries: its GPU code, its version floors, and what could not be read.

    Attributes:
        gpu: one :class:`GpuCode` per kind and architecture, in :func:`arch_key` order.
        floors: the highest ``GLIBC``/``GLIBCXX``/``CXXABI``/``GCC`` version of each needed.
        problems: why part of the file could not be read (one line each).

    Raises:
        Nothing: a value.
    """

    gpu: tuple[GpuCode, ...] = ()
    floors: tuple[VersionNeed, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.gpu or self.floors or self.problems)


def arch_key(arch: str) -> tuple[int, str]:
    """``sm_90a`` -> ``(90, "a")``: architectures sort by number, then suffix."""
    match = _ARCH.match(arch)
    return (int(match[1]), match[2]) if match else (1 << 31, arch)


def _row_key(code: GpuCode) -> tuple[int, tuple[int, str], str]:
    return _KIND_ORDER.get(code.kind, 9), arch_key(code.arch), code.kind


def summarise(entries: Iterable[FatbinEntry], problems: list[str]) -> tuple[GpuCode, ...]:
    """Entries added up per kind and architecture (at most :data:`MAX_ARCH_ROWS` rows)."""
    rows: dict[tuple[str, str], list[int]] = {}
    for entry in entries:
        row = rows.get((entry.kind, entry.arch))
        if row is None:
            if len(rows) >= MAX_ARCH_ROWS:
                problems.append(f"more than {MAX_ARCH_ROWS} kinds and architectures of GPU code")
                break
            row = rows[(entry.kind, entry.arch)] = [0, 0, 0, 0]
        row[0] += 1
        row[1] += entry.stored
        row[2] += entry.size
        row[3] += entry.compressed
    return tuple(sorted((GpuCode(kind, arch, *row) for (kind, arch), row in rows.items()),
                        key=_row_key))


def _elf_entries(region: Region, table: SectionTable, problems: list[str],
                 stop: Stop | None) -> Iterator[FatbinEntry]:
    sections = disjoint((section for name in FATBIN_SECTIONS for section in table.named(name)),
                        problems)
    for section in sections:
        yield from iter_entries(region, section, problems, stop)


def _region_entries(region: Region, problems: list[str], stop: Stop | None,
                    head: bytes | None = None, table: SectionTable | None = None
                    ) -> Iterator[tuple[str, FatbinEntry]]:
    # One header read per file or member: a libcublas_static.a has thousands of members, and
    # reading each one's first bytes three times was a third of its cost.
    head = region.pread(64, 0) if head is None else head
    if head[:4] == ELF_MAGIC:
        table = read_sections(region, head) if table is None else table
        if table is not None:
            if table.problem:
                problems.append(f"{region.name}: {table.problem}")
            for entry in _elf_entries(region, table, problems, stop):
                yield region.name, entry
    elif head[:8] == AR_MAGIC:
        for member in iter_members(region, problems, stop):
            member_head = member.pread(64, 0)
            if member_head[:4] != ELF_MAGIC:
                continue
            table = read_sections(member, member_head)
            if table is None:
                continue
            if table.problem:
                # ``libx_static.a(o1.o)``: the archive named by its file name, which stays in
                # the message when a caller drops the directory it was read from.
                short = os.path.basename(region.name) + member.name[len(region.name):]
                problems.append(f"{short}: {table.problem}")
            for entry in _elf_entries(member, table, problems, stop):
                yield member.name, entry


def fatbin_entries(path: str | os.PathLike[str], problems: list[str], *,
                   stop: Stop | None = None) -> Iterator[tuple[str, FatbinEntry]]:
    """Every fatbinary entry of an ELF file or of a static archive's ELF members, in file
    order, with the name of the file or ``archive(member)`` holding it. ``problems`` gets at
    most :data:`~cudasplit._elf.read.bounds.MAX_PROBLEMS` lines and one more for the rest
    (when the walk ends)."""
    name = os.fspath(path)
    found = Problems(name)
    try:
        with open(name, "rb") as stream:
            region = Region(stream.fileno(), 0, os.fstat(stream.fileno()).st_size, name)
            yield from _region_entries(region, found, stop)
    finally:
        hand_back(found, problems)


def read_inside(path: str | os.PathLike[str], *, size: int | None = None,
                wait: Callable[[int], None] | None = None,
                stop: Stop | None = None) -> Inside | None:
    """GPU code and version floors of one file; ``None`` when it is neither ELF nor a static
    archive. ``OSError`` when it cannot be opened. A file still being written is read as it
    grows: ``size`` is what it will hold, ``wait(offset)`` returns once the file holds the
    bytes before ``offset`` (a static archive's members are read while its later ones are
    still decoding). ``stop()``: asked every few thousand steps; once true the read ends with
    :class:`~cudasplit._elf.read.bounds.Stopped` (an ``OSError``)."""
    name = os.fspath(path)
    problems = Problems(name)
    with open(name, "rb") as stream:
        fd = stream.fileno()
        region = Region(fd, 0, os.fstat(fd).st_size if size is None else size, name,
                        wait=wait)
        head = region.pread(64, 0)
        if head[:4] != ELF_MAGIC and head[:8] != AR_MAGIC:
            return None
        table = read_sections(region, head) if head[:4] == ELF_MAGIC else None
        gpu = summarise((e for _, e in _region_entries(region, problems, stop, head, table)),
                        problems)
        floors: tuple[VersionNeed, ...] = ()
        if table is not None and len(table):
            floors = version_floors(version_needs(region, table, problems, stop))
    return Inside(gpu, floors, tuple(problems.lines()))


def read_exports(path: str | os.PathLike[str], problems: list[str] | None = None, *,
                 stop: Stop | None = None) -> tuple[ExportedSymbol, ...]:
    """The dynamic symbols an ELF file exports, with their versions (``()`` when not ELF);
    at most :data:`~cudasplit._elf.read.symbols.MAX_EXPORTS` of them."""
    name = os.fspath(path)
    found = Problems(name)
    try:
        with open(name, "rb") as stream:
            fd = stream.fileno()
            region = Region(fd, 0, os.fstat(fd).st_size, name)
            table = read_sections(region)
            if table is None or not len(table):
                return ()
            return exported_symbols(region, table, found, stop)
    finally:
        hand_back(found, problems)
