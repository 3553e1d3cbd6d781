"""Read and check the ELF header, the program headers and the section headers of a file.

The program headers are checked the way the loader would refuse them (bounds, alignment,
congruence, order); section headers that overlap a segment or the headers are ignored, since
the writer updates them in place.
"""

from __future__ import annotations

import itertools
import os
import struct
from dataclasses import dataclass

from cudasplit._elf.read.const import (
    EHDR_FORMAT,
    ELF_MAGIC,
    PAGE,
    PHDR_FIELDS,
    PHDR_FORMAT,
    PT_DYNAMIC,
    PT_INTERP,
    PT_LOAD,
    PT_NULL,
    SHDR_FORMAT,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    SHT_NOBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
)
from cudasplit._elf.read.raw import Phdr, RawElf, Shdr
from cudasplit.errors import ElfError


@dataclass(frozen=True, slots=True)
class ElfIdent:
    """What the first 20 bytes of an ELF file say: class, byte order and machine."""

    bits: int           # 32 or 64
    bo: str             # struct byte order: "<" or ">"
    machine: int        # e_machine

    @property
    def little_endian(self) -> bool:
        return self.bo == "<"


def elf_ident(head: bytes) -> ElfIdent | None:
    """The one decoder of ELF identification (every reader asks it): ``None`` when ``head``
    is not ELF or its class or data byte is not one the format defines."""
    if len(head) < 20 or head[:4] != ELF_MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    bo = "<" if head[5] == 1 else ">"
    return ElfIdent(32 if head[4] == 1 else 64, bo, struct.unpack_from(bo + "H", head, 18)[0])


def _unpack_phdr(elf_bits: int, bo: str, data: bytes) -> Phdr:
    fmt, order = PHDR_FORMAT[elf_bits]
    raw = struct.unpack(bo + fmt, data[: struct.calcsize(fmt)])
    values = {PHDR_FIELDS[i]: raw[pos] for pos, i in enumerate(order)}
    return Phdr(**values)


def read_header(path: str, fd: int, strict: bool = True) -> dict[str, int | str]:
    """The ELF header's fields, named as :class:`RawElf` names them; ElfError when not ELF."""
    head = os.pread(fd, 64, 0)
    if head[:4] != ELF_MAGIC:
        raise ElfError(f"{path}: not an ELF file")
    ident = elf_ident(head)
    if ident is None or len(head) < 52:
        raise ElfError(f"{path}: corrupt ELF header (class/data byte)")
    bits, bo = ident.bits, ident.bo
    fmt = bo + EHDR_FORMAT[bits]
    if len(head) < struct.calcsize(fmt):
        raise ElfError(f"{path}: truncated ELF header")
    (_, e_type, e_machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = \
        struct.unpack_from(fmt, head)
    if strict and phnum == 0:
        from cudasplit.errors import PatchError
        raise PatchError(f"{path}: no dynamic section (no program headers: relocatable file)")
    if phnum and phentsize != struct.calcsize(PHDR_FORMAT[bits][0]):
        raise ElfError(f"{path}: corrupt ELF header (program header size {phentsize}, "
                       f"count {phnum})")
    return {"bits": bits, "bo": bo, "e_type": e_type, "e_machine": e_machine, "phoff": phoff,
            "shoff": shoff, "phentsize": phentsize, "phnum": phnum, "shentsize": shentsize,
            "shnum": shnum}


def read_shdrs(elf: RawElf) -> list[Shdr]:
    """Section headers; [] when absent or malformed (sections are optional for the loader)."""
    fmt = elf.bo + SHDR_FORMAT[elf.bits]
    if elf.shnum == 0 or elf.shentsize != struct.calcsize(fmt) or \
            elf.shoff + elf.shnum * elf.shentsize > elf.size:
        return []
    lo, hi = elf.shoff, elf.shoff + elf.shnum * elf.shentsize
    # The writer updates section headers and .symtab entries in place: a table that overlaps
    # the headers or any segment (hostile, or damaged) is ignored rather than written into.
    used = [(0, elf.phoff + elf.phnum * elf.phentsize)]
    used += [(ph.p_offset, ph.file_end) for ph in elf.phdrs if ph.p_type != PT_NULL]
    if any(a < hi and lo < b for a, b in used):
        return []
    data = elf.pread(elf.shnum * elf.shentsize, elf.shoff)
    out = []
    for i, fields in enumerate(struct.iter_unpack(fmt, data)):
        _, sh_type, flags, addr, offset, size, link, _, align, entsize = fields
        out.append(Shdr(i, sh_type, flags, addr, offset, size, link, align, entsize))
    # The loader never reads section headers: a bogus e_shoff still loads, and a table that
    # does not look like one is left alone rather than "updated" wherever it points.
    return out if _plausible(elf, out, data[:elf.shentsize]) else []


# sh_type -> the types its sh_link may name (gABI): a table read from a wrong offset (or
# shifted by an entry) names sections of the wrong kind.
_LINK_TYPES = {
    SHT_DYNSYM: (SHT_STRTAB,), SHT_SYMTAB: (SHT_STRTAB,), SHT_DYNAMIC: (SHT_STRTAB,),
    SHT_GNU_VERNEED: (SHT_STRTAB,), SHT_GNU_VERDEF: (SHT_STRTAB,),
    SHT_HASH: (SHT_DYNSYM, SHT_SYMTAB), SHT_GNU_HASH: (SHT_DYNSYM, SHT_SYMTAB),
    SHT_GNU_VERSYM: (SHT_DYNSYM,),
}
_SHN_XINDEX = 0xFFFF


def _plausible(elf: RawElf, shdrs: list[Shdr], first: bytes) -> bool:
    """Does the table look like a section header table: a null entry 0, a string table at
    e_shstrndx, contents inside the file, and links that name sections of the right kind?"""
    raw = os.pread(elf.fd, 2, 62 if elf.bits == 64 else 50)
    shstrndx = struct.unpack(elf.bo + "H", raw)[0] if len(raw) == 2 else 0
    null = shdrs[0]
    if shstrndx == _SHN_XINDEX:
        shstrndx = null.sh_link
    elif first.strip(b"\0"):
        return False
    if null.sh_type != 0 or shstrndx >= len(shdrs) or \
            (shstrndx and shdrs[shstrndx].sh_type != SHT_STRTAB):
        return False
    for sec in shdrs[1:]:
        if sec.sh_type != SHT_NOBITS and sec.sh_offset + sec.sh_size > elf.size:
            return False
        kinds = _LINK_TYPES.get(sec.sh_type)
        if kinds is not None and (sec.sh_link >= len(shdrs) or
                                  shdrs[sec.sh_link].sh_type not in kinds):
            return False
    return True


def read_phdrs(elf: RawElf) -> list[Phdr]:
    """The program header table (its size was checked against the ELF class by the header)."""
    table = elf.pread(elf.phnum * elf.phentsize, elf.phoff)
    return [_unpack_phdr(elf.bits, elf.bo, table[i * elf.phentsize:(i + 1) * elf.phentsize])
            for i in range(elf.phnum)]


_INSIDE_TYPES = (PT_DYNAMIC, PT_INTERP, 0x6474E550)  # EH_FRAME
PT_TLS, PT_GNU_RELRO = 7, 0x6474E552


def _inside(lo: int, hi: int, loads: list[Phdr]) -> bool:
    """Are addresses [lo, hi) all inside one PT_LOAD's memory?"""
    return any(ld.p_vaddr <= lo and hi <= ld.mem_end for ld in loads)


def _pages_mapped(lo: int, hi: int, loads: list[Phdr]) -> bool:
    """Is every page of [lo, hi) mapped by some PT_LOAD (each maps whole pages)?"""
    spans = sorted((ld.p_vaddr - ld.p_vaddr % PAGE, -(-ld.mem_end // PAGE) * PAGE)
                   for ld in loads)
    for a, b in spans:
        if a <= lo < b:
            lo = b
        if lo >= hi:
            return True
    return lo >= hi


def _loader_reach(ph: Phdr, loads: list[Phdr]) -> bool:
    """Does the part of segment `ph` the loader touches lie in mapped memory?

    ld.so mprotects PT_GNU_RELRO page-rounded *down* at both ends (lld pads RELRO to the page
    end, past its PT_LOAD's memsz); it copies only PT_TLS's first p_filesz bytes (the
    initialization image) and zero-fills the rest of the TLS block elsewhere (lld and mold give
    .tbss no room in any PT_LOAD); it reads the others whole.
    """
    if ph.p_type == PT_GNU_RELRO:
        lo = ph.p_vaddr - ph.p_vaddr % PAGE
        hi = (ph.p_vaddr + ph.p_memsz) - (ph.p_vaddr + ph.p_memsz) % PAGE
        return hi <= lo or _pages_mapped(lo, hi, loads)
    if ph.p_type == PT_TLS:
        return not ph.p_filesz or _inside(ph.p_vaddr, ph.p_vaddr + ph.p_filesz, loads)
    return not ph.p_memsz or _inside(ph.p_vaddr, ph.mem_end, loads)


def check_phdrs(elf: RawElf) -> None:
    """Refuse program headers the loader would refuse (or that would make us write nonsense)."""
    loads = [ph for ph in elf.phdrs if ph.p_type == PT_LOAD]
    if not loads:
        raise elf.fail("no PT_LOAD segment")
    for ph in elf.phdrs:
        if ph.p_type != PT_NULL and ph.file_end > elf.size:
            raise elf.fail(f"segment at {ph.p_offset:#x} (+{ph.p_filesz:#x}) lies past the end "
                           "of the file")
    for ph in loads:
        if ph.p_align & (ph.p_align - 1) or ph.p_filesz > ph.p_memsz:
            raise elf.fail(f"bad PT_LOAD at {ph.p_offset:#x}")
        if ph.p_align > 1 and ph.p_offset % ph.p_align != ph.p_vaddr % ph.p_align:
            raise elf.fail(f"PT_LOAD at {ph.p_offset:#x} breaks offset/address congruence")
    for ph in elf.phdrs:
        # The loader uses these addresses (l_ld, mprotect of RELRO, TLS image, unwinding):
        # outside every PT_LOAD they reach whatever is mapped next to the object.
        if ph.p_type in (*_INSIDE_TYPES, PT_TLS, PT_GNU_RELRO) and not _loader_reach(ph, loads):
            raise elf.fail(f"segment type {ph.p_type:#x} at {ph.p_vaddr:#x} lies outside every "
                           "PT_LOAD")
    for prev, cur in itertools.pairwise(loads):
        if cur.p_vaddr < prev.mem_end:
            raise elf.fail(f"PT_LOAD segments overlap or are unsorted ({prev.p_vaddr:#x}, "
                           f"{cur.p_vaddr:#x})")
