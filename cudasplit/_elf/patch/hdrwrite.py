"""Writes that keep the headers true when the append tier moves bytes.

The new program header table, ``e_phnum``, a moved section's header and its ``STT_SECTION``
symbol in ``.symtab``: section-based tools (``strip``, ``readelf``) must see the live copies.
"""

from __future__ import annotations

import struct

from cudasplit._elf.patch.room import Room
from cudasplit._elf.read import PT_LOAD, PT_NULL, PT_PHDR, SHT_SYMTAB, Phdr, RawElf, Shdr


def new_table(elf: RawElf, room: Room, phdrs: list[Phdr], load: Phdr) -> list[Phdr]:
    """Old headers (minus a reused one) with `load` right after the last PT_LOAD.

    The loader sizes its reservation from the first and last PT_LOAD in table order, so the
    new, highest segment must also come last among the PT_LOADs.
    """
    kept = [ph for i, ph in enumerate(phdrs) if i != room.index]
    last = max(i for i, ph in enumerate(kept) if ph.p_type == PT_LOAD)
    kept.insert(last + 1, load)
    for ph in kept:
        if ph.p_type == PT_PHDR:
            ph.p_filesz = ph.p_memsz = len(kept) * elf.phentsize
    return kept


def phnum_write(elf: RawElf, phnum: int) -> tuple[int, bytes]:
    """Rewrite e_phnum (bytes 44 of the ELF32 header, 56 of the ELF64 one)."""
    return (56 if elf.bits == 64 else 44, struct.pack(elf.bo + "H", phnum))


def shdr_write(elf: RawElf, sec: Shdr, addr: int, offset: int, size: int) -> tuple[int, bytes]:
    """Rewrite sh_addr, sh_offset, sh_size of one section header (they are contiguous)."""
    word = "I" if elf.bits == 32 else "Q"
    pos = elf.shoff + sec.num * elf.shentsize + (12 if elf.bits == 32 else 16)
    return (pos, struct.pack(elf.bo + word * 3, addr, offset, size))


def section_symbol_writes(elf: RawElf, sec: Shdr, addr: int) -> list[tuple[int, bytes]]:
    """Move the STT_SECTION symbol of a moved section in .symtab along with the section.

    Section symbols come first among the locals (ld emits one per section right after the null
    symbol), so only the first shnum + 1 entries are read, whatever the size of .symtab.
    """
    writes = []
    is64 = elf.bits == 64
    fmt = elf.bo + ("IBBHQQ" if is64 else "IIIBBH")
    segments = [(ph.p_offset, ph.file_end) for ph in elf.phdrs if ph.p_type != PT_NULL]
    for tab in (s for s in elf.shdrs if s.sh_type == SHT_SYMTAB and
                s.sh_entsize == struct.calcsize(fmt) and not
                any(a < s.file_end and s.sh_offset < b for a, b in segments)):
        count = min(tab.sh_size // tab.sh_entsize, len(elf.shdrs) + 1)
        data = elf.pread(count * tab.sh_entsize, tab.sh_offset)
        for i, rec in enumerate(struct.iter_unpack(fmt, data)):
            info, shndx, value = (rec[1], rec[3], rec[4]) if is64 else (rec[3], rec[5], rec[1])
            if info & 0xF == 3 and shndx == sec.num and value == sec.sh_addr:  # STT_SECTION
                pos = tab.sh_offset + i * tab.sh_entsize + (8 if is64 else 4)
                writes.append((pos, struct.pack(elf.bo + ("Q" if is64 else "I"), addr)))
    return writes
