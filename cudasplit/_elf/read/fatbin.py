"""NVIDIA fatbinaries: which GPU code an ELF file carries, read from the container headers only.

Where the GPU code lives: ``nvcc`` puts a fatbinary into the host object's ``.nv_fatbin``
section (``__nv_relfatbin`` for relocatable device code, ``-rdc``); a linked library keeps them,
one container after the other (libcublasLt 13: 2,782 containers, 5,737 entries in 140 MB). The
layout, as NVIDIA's tools write it (little-endian; facts checked against ``cuobjdump`` on the
real libraries, see ``docs/reference/gpu-code.md``)::

    container:  u32 magic 0xBA55ED50 | u16 version 1 | u16 header size (16) | u64 bytes that follow
    entry:      u16 kind | u16 version | u32 header size (64, or more: extended)
                u64 payload bytes (as stored, padded to 8)
                u32 compressed bytes | u32 options offset | u16 minor | u16 major (code version)
                u32 arch (75, 90, 100 ...) | u32 name offset | u32 name length
                u64 flags | u64 reserved | u64 uncompressed bytes
                ... extended header, then the payload; the next entry follows the payload

Kinds: 1 PTX, 2 SASS (a cubin, ELF), 8 LTO-IR (``-dlto``: NVVM IR for link-time
optimisation). Flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 compressed (NVIDIA's LZ
format), 0x8000 compressed (zstd), 0x100000 architecture-specific (``sm_90a``: runs on that exact
GPU only), 0x200000 family-specific (``sm_100f``: runs on the family's later members).

Nothing but headers is read: one 64 KiB window at a time, never a payload. Every count, size and
offset comes from the file, so every step is checked against the section's end and advances at
least one entry header (64 bytes): a hostile fatbin (truncated, lying sizes, offsets past the
end, zero-sized entries) ends the walk with a problem string, never an exception, a long loop or
a large allocation. Entries are yielded one at a time (callers add them up as they come), and
sections that overlap are walked once (:func:`disjoint`): 300 section headers over the same 4 MB
of entries made 18.7 million entry objects.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cudasplit._elf.read.bounds import Stop, checkpoint
from cudasplit._elf.read.sections import Region, Section

__all__ = ["FATBIN_MAGIC", "FATBIN_SECTIONS", "FatbinEntry", "arch_name", "disjoint",
           "iter_entries"]

FATBIN_MAGIC = 0xBA55ED50
# The executable fatbinary (linked host code) and the relocatable one (``nvcc -rdc`` objects).
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")

KINDS = {1: "ptx", 2: "sass", 8: "ltoir"}
FLAG_COMPRESSED = 0x2000 | 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_WINDOW = 1 << 16
MAX_FATBIN_SECTIONS = 4096    # fatbinary sections read per file (an object has one or two)


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One piece of GPU code in a fatbinary.

    Attributes:
        kind: ``sass`` (a cubin), ``ptx``, ``ltoir``, or ``kind-N`` for a kind not known here.
        arch: ``sm_90``, ``sm_90a``, ``sm_100f``: the architecture it was built for (PTX too).
        stored: bytes it takes in the file (its header and its payload as stored).
        size: its payload unpacked (the cubin's or the PTX text's size).
        compressed: whether the payload is stored compressed.
        section: the section holding it (``.nv_fatbin`` or ``__nv_relfatbin``).
        container: the ordinal of its container in the section (entries of one container
            are one compilation's code: the driver chooses among them).
    """

    kind: str
    arch: str
    stored: int
    size: int
    compressed: bool
    section: str
    container: int = 0


def arch_name(arch: int, flags: int) -> str:
    """``sm_90a`` from the entry's arch number and flags."""
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return f"sm_{arch}{suffix}"


class _Window:
    """Header reads through one cached window of the section (payloads are skipped, not read)."""

    def __init__(self, region: Region, section: Section) -> None:
        self.region, self.start, self.end = region, section.offset, section.offset + section.size
        self.base, self.data = 0, b""

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (relative to the section), or fewer at its end."""
        length = max(0, min(length, self.end - self.start - offset))
        rel = self._at(offset, length)
        return self.data[rel:rel + length]

    def unpack(self, layout: struct.Struct, offset: int) -> tuple[Any, ...] | None:
        """``layout`` unpacked at ``offset``; ``None`` where the section ends before it (no
        bytes copied: a static archive's thousands of headers are read this way)."""
        if offset + layout.size > self.end - self.start:
            return None
        rel = self._at(offset, layout.size)  # first: it may read a new window into data
        return layout.unpack_from(self.data, rel)

    def _at(self, offset: int, length: int) -> int:
        """Where ``offset`` lies in the window's data, read anew when it is not there."""
        rel = offset - self.base
        if rel < 0 or rel + length > len(self.data):
            want = max(length, min(_WINDOW, self.end - self.start - offset))
            self.base, self.data = offset, self.region.pread(want, self.start + offset)
            rel = 0
        return rel


def disjoint(sections: Iterable[Section], problems: list[str]) -> list[Section]:
    """``sections`` in file order, less each one that overlaps one before it (said once, with
    how many): every byte of a file is walked at most once, whatever its headers claim. At
    most :data:`MAX_FATBIN_SECTIONS` are taken (an object has one or two)."""
    taken: list[Section] = []
    for section in sections:
        if len(taken) == MAX_FATBIN_SECTIONS:
            problems.append(f"more than {MAX_FATBIN_SECTIONS} fatbinary sections: the rest "
                            "are not read")
            break
        if section.size:
            taken.append(section)
    kept: list[Section] = []
    overlapping, name, reach = 0, "", 0
    for section in sorted(taken, key=lambda s: (s.offset, s.index)):
        if kept and section.offset < reach:
            overlapping, name = overlapping + 1, section.name
            continue
        kept.append(section)
        reach = section.end
    if overlapping:
        problems.append(f"{overlapping} {name} section headers overlap another fatbinary "
                        "section (each byte is read once)")
    return kept


def iter_entries(region: Region, section: Section, problems: list[str],
                 stop: Stop | None = None) -> Iterator[FatbinEntry]:
    """The entries of every container in ``section`` of ``region``, in file order; a damaged
    container ends the walk with a problem (the entries before it stand). ``stop``: asked
    every few thousand steps; :class:`~cudasplit._elf.read.bounds.Stopped` once it says so."""
    if section.offset + section.size > region.length:
        problems.append(f"{section.name} runs past the end of the file")
        return
    window, pos, size, ordinal = _Window(region, section), 0, section.size, 0
    steps = [0]
    while pos < size:
        steps[0] += 1
        checkpoint(stop, steps[0])
        head = window.read(pos, _CONTAINER.size)
        if len(head) < _CONTAINER.size or not head.strip(b"\0"):
            if head.strip(b"\0") or window.read(pos, 4096).strip(b"\0"):
                problems.append(f"{section.name}: {size - pos} bytes at {pos:#x} are not a "
                                "fatbinary")
            return  # zero padding after the last container
        magic, _version, header, length = _CONTAINER.unpack(head)
        if magic != FATBIN_MAGIC or header < _CONTAINER.size:
            problems.append(f"{section.name}: no fatbinary header at {pos:#x}")
            return
        end = pos + header + length
        if end > size:
            problems.append(f"{section.name}: container at {pos:#x} claims {length} bytes, "
                            f"{end - size} past the end of the section")
            return
        if not (yield from _entries(window, section.name, pos + header, end, ordinal, problems,
                                    stop, steps)):
            return
        ordinal += 1
        pos = end + (-end % 8 if not window.read(end, -end % 8).strip(b"\0") else 0)


def _entries(window: _Window, section: str, pos: int, end: int, ordinal: int,
             problems: list[str], stop: Stop | None, steps: list[int]
             ) -> Generator[FatbinEntry, None, bool]:
    """One container's entries; returns False when a damaged entry ended the walk."""
    while pos < end:
        steps[0] += 1
        checkpoint(stop, steps[0])
        fields = window.unpack(_ENTRY, pos) if pos + _ENTRY.size <= end else None
        if fields is None:
            problems.append(f"{section}: entry at {pos:#x} is cut short by its container's end")
            return False
        (kind, _v, header, payload, _csize, _opts, _minor, _major, arch, _noff, _nlen, flags,
         _r, unpacked) = fields
        if header < _ENTRY.size or pos + header + payload > end:
            problems.append(f"{section}: entry at {pos:#x} claims {header}+{payload} bytes "
                            "past its container's end")
            return False
        compressed = bool(flags & FLAG_COMPRESSED)
        yield FatbinEntry(KINDS.get(kind, f"kind-{kind}"), arch_name(arch, flags),
                          header + payload, unpacked if compressed else payload, compressed,
                          section, ordinal)
        pos += header + payload
    return True
