"""The parsed ELF file as the reader and writer see it: headers and bounded reads by offset.

:class:`RawElf` holds the open descriptor, the header fields, the program and section headers
and, once :mod:`cudasplit._elf.read.dynamic` has read it, the dynamic array; every read goes through
:meth:`RawElf.pread`, which refuses anything past the end of the file. A string is at most
:data:`MAX_STRING` bytes (the kernel refuses an interpreter path over 4 KiB), and the dynamic
strings are looked up once per offset, all of them together at most twice ``DT_STRSZ``: a
thousand ``DT_NEEDED`` entries naming one unterminated megabyte cannot make a gigabyte of
searching.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from cudasplit._elf.read.const import (
    DYN_FORMAT,
    PHDR_FIELDS,
    PHDR_FORMAT,
    PT_LOAD,
    SHT_NOBITS,
)
from cudasplit.errors import ElfError

MAX_STRING = 1 << 16     # bytes of one NUL-terminated string read by offset (PT_INTERP, .dynstr)


@dataclass(slots=True)
class Phdr:
    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_paddr: int
    p_filesz: int
    p_memsz: int
    p_align: int

    @property
    def file_end(self) -> int:
        return self.p_offset + self.p_filesz

    @property
    def mem_end(self) -> int:
        return self.p_vaddr + self.p_memsz


class Shdr(NamedTuple):
    """One section header (a tuple: NVIDIA files have ~30, read twice per edit); ``num`` is its
    index in the table."""

    num: int
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_addralign: int
    sh_entsize: int

    @property
    def file_end(self) -> int:
        return self.sh_offset + (0 if self.sh_type == SHT_NOBITS else self.sh_size)


@dataclass(slots=True)
class RawElf:
    """The parts of an ELF file the writer needs, with file offsets, read via ``os.pread``."""

    path: str
    fd: int
    size: int
    bits: int  # 32 | 64
    bo: str  # struct byte order: "<" | ">"
    e_type: int
    e_machine: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    phdrs: list[Phdr]
    shdrs: list[Shdr]
    dyn_off: int = 0  # file offset of the dynamic array
    dyn_cap: int = 0  # entries that fit into PT_DYNAMIC
    dyn: list[tuple[int, int]] | None = None  # entries before the first DT_NULL
    strtab_addr: int = 0
    strtab_off: int = 0
    strsz: int = 0
    cache: dict[str, object] = field(default_factory=dict)  # dynstr bytes, version refs

    # -- reading ------------------------------------------------------------------------------
    def fail(self, what: str) -> ElfError:
        return ElfError(f"{self.path}: corrupt ELF: {what}")

    def pread(self, length: int, offset: int) -> bytes:
        """Bounds-checked read: a short read means a truncated or lying file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(f"{length} bytes at {offset:#x} lie past the end of the file "
                            f"({self.size:#x})")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise self.fail(f"short read at {offset:#x}")
        return data

    def vaddr_to_offset(self, vaddr: int, length: int = 1) -> int:
        """File offset of a mapped address range (through PT_LOAD, like the loader)."""
        for p_vaddr, p_offset, p_filesz in self.load_spans():
            if p_vaddr <= vaddr and vaddr + length <= p_vaddr + p_filesz:
                return p_offset + vaddr - p_vaddr
        raise self.fail(f"address {vaddr:#x} is not in any PT_LOAD")

    def load_spans(self) -> list[tuple[int, int, int]]:
        """(p_vaddr, p_offset, p_filesz) of each PT_LOAD (the headers are not edited in place)."""
        spans = self.cache.get("loads")
        if not isinstance(spans, list):
            spans = self.cache["loads"] = [(ph.p_vaddr, ph.p_offset, ph.p_filesz)
                                           for ph in self.phdrs if ph.p_type == PT_LOAD]
        return spans

    @property
    def entries(self) -> list[tuple[int, int]]:
        return self.dyn or []

    def dyn_value(self, tag: int) -> int | None:
        return next((v for t, v in self.entries if t == tag), None)

    def dynstr(self) -> bytes:
        """The string table, read once (its names are looked up many times per edit)."""
        data = self.cache.get("dynstr")
        if not isinstance(data, bytes):
            data = self.cache["dynstr"] = self.pread(self.strsz, self.strtab_off)
        return data

    def names_budget(self) -> int:
        """Bytes of dynamic names a reader may collect from this file (all lookups together,
        repeated ones included): twice DT_STRSZ and 1 MiB."""
        return 2 * self.strsz + (1 << 20)

    def string_at(self, offset: int, limit: int) -> bytes:
        """NUL-terminated bytes at file `offset`, which must end before file offset `limit`
        and within :data:`MAX_STRING` bytes."""
        out = bytearray()
        while True:
            want = min(4096, limit - offset - len(out))
            if want <= 0:
                raise self.fail(f"unterminated string at {offset:#x}")
            if len(out) >= MAX_STRING:
                raise self.fail(f"string at {offset:#x} is longer than {MAX_STRING} bytes")
            chunk = self.pread(want, offset + len(out))
            end = chunk.find(b"\0")
            if end >= 0:
                return bytes(out + chunk[:end])
            out += chunk

    def dynstr_at(self, value: int) -> bytes:
        """The .dynstr string at `value`; it must start and end inside DT_STRSZ, within
        :data:`MAX_STRING` bytes. Each offset is looked up once; all lookups together read at
        most twice DT_STRSZ (plus 1 MiB), else the file is refused."""
        if value >= self.strsz:
            raise self.fail(f"string offset {value:#x} beyond DT_STRSZ {self.strsz:#x}")
        seen = self.cache.setdefault("strings", {})
        assert isinstance(seen, dict)
        found = seen.get(value)
        if isinstance(found, bytes):
            return found
        table = self.dynstr()
        end = table.find(b"\0", value, value + MAX_STRING + 1)
        if end < 0:
            if len(table) - value > MAX_STRING:
                raise self.fail(f"string at {value:#x} is longer than {MAX_STRING} bytes")
            raise self.fail(f"string at {value:#x} runs past DT_STRSZ {self.strsz:#x}")
        spent = self.cache.get("string_bytes", 0)
        assert isinstance(spent, int)
        spent += end - value
        if spent > self.names_budget():
            raise self.fail("dynamic strings overlap: their names add up to more than twice "
                            "DT_STRSZ")
        self.cache["string_bytes"] = spent
        seen[value] = name = table[value:end]
        return name

    # -- packing ------------------------------------------------------------------------------
    def pack_phdr(self, ph: Phdr) -> bytes:
        fmt, order = PHDR_FORMAT[self.bits]
        values = [getattr(ph, PHDR_FIELDS[i]) for i in order]
        return struct.pack(self.bo + fmt, *values)

    def pack_dyn(self, entries: Iterable[tuple[int, int]]) -> bytes:
        fmt = self.bo + DYN_FORMAT[self.bits]
        return b"".join(struct.pack(fmt, t, v) for t, v in entries)

    @property
    def dynent(self) -> int:
        return struct.calcsize(DYN_FORMAT[self.bits])


def align_up(value: int, align: int) -> int:
    return value if align <= 1 else (value + align - 1) // align * align
