"""Named section headers of an ELF file lying anywhere in a file (a whole file or an ``ar`` member).

The fatbinary, symbol and version readers look sections up by name and type; a relocatable
object inside a static archive has no program headers and sits at an offset inside the archive,
so this reader works on a :class:`Region` (descriptor, start, length) and never on the loader's
view. Every read is an ``os.pread`` bounded by the region. The header table is read once, as
bytes (at most :data:`MAX_SECTIONS` headers: a table claiming more is not read), and a header
becomes a :class:`Section` only when a reader asks for it; the section name table is read once,
at most :data:`MAX_NAMES` bytes of it. A region that is not ELF, or whose table cannot be read,
has no sections, with the reason in :attr:`SectionTable.problem`: for these readers a damaged
header is something to report, never an exception.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cudasplit._elf.read.const import ELF_MAGIC, SHT_NOBITS

__all__ = ["MAX_NAMES", "MAX_SECTIONS", "Region", "Section", "SectionTable", "read_sections"]

MAX_NAMES = 1 << 20          # bytes of .shstrtab read; names past it are not looked up
# Section headers read per file (16 MiB of ELF64 headers). The objects of NVIDIA's static
# archives hold tens of thousands; a header table claiming more is a problem, not read.
MAX_SECTIONS = 1 << 18
_SHN_XINDEX = 0xFFFF
_SHDR = {64: "IIQQQQIIQQ", 32: "IIIIIIIIII"}


@dataclass(frozen=True, slots=True)
class Region:
    """``length`` bytes of the open file ``fd`` from ``start``: one ELF file or archive member."""

    fd: int
    start: int
    length: int
    name: str          # for messages: the file, or ``archive.a(member.o)``
    known: bytes = b""  # the region's first bytes, when its reader has them already
    # A file still being written: called with the file offset a read needs before it is made
    # (it returns once those bytes are there, or raises OSError when they never will be).
    wait: Callable[[int], None] | None = None

    def pread(self, length: int, offset: int) -> bytes:
        """Bytes at ``offset`` (relative to the region); shorter only at the region's end."""
        if offset < 0 or length <= 0 or offset >= self.length:
            return b""
        length = min(length, self.length - offset)
        if offset + length <= len(self.known):
            return self.known[offset:offset + length]
        if self.wait is not None:
            self.wait(self.start + offset + length)
        return os.pread(self.fd, length, self.start + offset)

    def sub(self, offset: int, length: int, name: str, known: bytes = b"") -> Region:
        """A part of this region (clipped to it); ``known``: its first bytes, already read."""
        offset = max(0, min(offset, self.length))
        length = max(0, min(length, self.length - offset))
        return Region(self.fd, self.start + offset, length, name, known[:length], self.wait)


@dataclass(frozen=True, slots=True)
class Section:
    """One section header, with its name and offsets relative to the region."""

    index: int
    name: str
    sh_type: int
    offset: int
    size: int          # 0 for SHT_NOBITS (it has no bytes in the file)
    link: int
    info: int
    entsize: int

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True, slots=True)
class SectionTable:
    """The sections of one ELF region, its class and byte order; ``problem`` says why a
    table that should be there was not read.

    The headers stay bytes, and a header is unpacked (and its name decoded) only when asked
    for: a static archive's objects hold tens of thousands of sections, of which the readers
    want two names (a ``Section`` per header and a decoded name for each made reading
    ``libcublas_static.a`` cost seconds). Lookups by name and type scan the headers' 32-bit
    words at C speed (:attr:`words`)."""

    bits: int
    bo: str
    headers: bytes = b""
    names: bytes = b""
    problem: str | None = None
    words: array[int] = field(default_factory=lambda: array("I"))

    @property
    def _size(self) -> int:
        return 64 if self.bits == 64 else 40

    def __len__(self) -> int:
        return len(self.headers) // self._size if self.bits else 0

    def _column(self, word: int) -> array[int]:
        """Word ``word`` (0: sh_name, 1: sh_type) of every header."""
        return self.words[word::self._size // 4]

    def named(self, name: str) -> Iterator[Section]:
        """The sections called ``name``, in table order: those whose name offset starts
        ``name\\0`` in the name table (names may share a tail, ``.rela.nv_fatbin`` and
        ``.nv_fatbin``). One pass over the name table and one over the headers."""
        wanted = name.encode("utf-8", "surrogateescape") + b"\0"
        offsets, at = set(), self.names.find(wanted)
        while at >= 0:
            offsets.add(at)
            at = self.names.find(wanted, at + 1)
        if not offsets:
            return
        for index, value in enumerate(self._column(0)):
            if value in offsets:
                yield self._section(index)

    def of_type(self, sh_type: int) -> Iterator[Section]:
        """The sections of type ``sh_type``, in table order."""
        for index, value in enumerate(self._column(1)):
            if value == sh_type:
                yield self._section(index)

    def first(self, sh_type: int) -> Section | None:
        return next(self.of_type(sh_type), None)

    def at(self, index: int) -> Section | None:
        return self._section(index) if 0 <= index < len(self) else None

    def _section(self, index: int) -> Section:
        r = struct.unpack_from(self.bo + _SHDR[self.bits], self.headers, index * self._size)
        return Section(index, _name_at(self.names, r[0]), r[1], r[4],
                       0 if r[1] == SHT_NOBITS else r[5], r[6], r[7], r[9])


def read_sections(region: Region, head: bytes | None = None) -> SectionTable | None:
    """The section table of ``region``; ``None`` when the region is not ELF at all.
    ``head``: its first 64 bytes, when the caller has read them already."""
    if head is None or len(head) < min(64, region.length):
        head = region.pread(64, 0)
    if head[:4] != ELF_MAGIC:
        return None
    if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
        return SectionTable(0, "<", problem="corrupt ELF header")
    bits, bo = (64 if head[4] == 2 else 32), ("<" if head[5] == 1 else ">")
    if bits == 64 and len(head) < 64:
        return SectionTable(bits, bo, problem="truncated ELF header")
    if bits == 64:
        shoff, = struct.unpack_from(bo + "Q", head, 40)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 58)
    else:
        shoff, = struct.unpack_from(bo + "I", head, 32)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 46)
    return _table(region, bits, bo, shoff, shentsize, shnum, shstrndx)


def _table(region: Region, bits: int, bo: str, shoff: int, shentsize: int, shnum: int,
           shstrndx: int) -> SectionTable:
    fmt = bo + _SHDR[bits]
    entsize = struct.calcsize(fmt)
    if shoff == 0:
        return SectionTable(bits, bo)       # no section headers (stripped of them)
    if shentsize != entsize:
        return SectionTable(bits, bo, problem=f"section header size {shentsize}")
    first = region.pread(entsize, shoff)
    if len(first) != entsize:
        return SectionTable(bits, bo, problem="section headers lie past the end")
    null = struct.unpack(fmt, first)
    if shnum == 0:          # more than 0xff00 sections: the count is in entry 0's sh_size
        shnum = null[5]
    if shstrndx == _SHN_XINDEX:
        shstrndx = null[6]
    if shnum > (region.length - shoff) // entsize:
        return SectionTable(bits, bo, problem=f"{shnum} section headers do not fit the file")
    if shnum > MAX_SECTIONS:
        return SectionTable(bits, bo, problem=f"{shnum} section headers, more than the "
                                              f"{MAX_SECTIONS} this reader reads")
    headers = region.pread(shnum * entsize, shoff)
    words = array("I")
    words.frombytes(headers)
    if (bo == "<") != (sys.byteorder == "little"):
        words.byteswap()
    names = b""
    if 0 < shstrndx < shnum:
        entry = struct.unpack_from(fmt, headers, shstrndx * entsize)
        names = region.pread(min(entry[5], MAX_NAMES), entry[4])
    return SectionTable(bits, bo, headers, names, words=words)


def _name_at(names: bytes, offset: int) -> str:
    if offset >= len(names):
        return ""
    end = names.find(b"\0", offset, offset + 4096)
    return names[offset:end if end >= 0 else min(len(names), offset + 4096)].decode(
        "utf-8", "surrogateescape")
