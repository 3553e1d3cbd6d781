"""Bounded walks over file-controlled tables: symbol names, version records, notes.

Every count and next-offset here comes from the file: each walk is bounded by the file size and
by :data:`MAX_VERSION_RECORDS`, and refuses cycles, so a small hostile file cannot make a walk run
long or allocate much; symbol tables are read once each, and tables that overlap or add up to
more than the file are not read at all. Results are cached on the
:class:`~cudasplit._elf.read.raw.RawElf` (walked once per parsed file).
"""

from __future__ import annotations

import itertools
import struct
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from cudasplit._elf.read.const import (
    DT_VERDEF,
    DT_VERDEFNUM,
    DT_VERNEED,
    DT_VERNEEDNUM,
    MAX_NOTE_BYTES,
    NT_GNU_BUILD_ID,
    SHT_DYNSYM,
    SHT_STRTAB,
    SHT_SYMTAB,
)
from cudasplit._elf.read.raw import Phdr, RawElf, Shdr, align_up

# Version records (needs, definitions and their aux records) walked per file: a version index
# has 15 bits, so no loader-valid file needs more than 32,767 of them.
MAX_VERSION_RECORDS = 1 << 16

# --------------------------------------------------------------------------- .dynstr references

def dynstr_section(elf: RawElf) -> Shdr | None:
    """The section header of the .dynstr that DT_STRTAB points at (None without one)."""
    return next((s for s in elf.shdrs if s.sh_type == SHT_STRTAB and s.sh_offset ==
                 elf.strtab_off and s.sh_addr == elf.strtab_addr), None)


def symbol_name_refs(elf: RawElf, dynstr: Shdr | None) -> list[int] | None:
    """st_name of every symbol table that uses .dynstr, or None when that cannot be known
    (read once per parsed file); ElfError when the tables overlap."""
    if "symbols" in elf.cache:
        cached = elf.cache["symbols"]
        return cached if isinstance(cached, list) else None
    elf.cache["symbols"] = names = _symbol_names(elf, dynstr)
    return names


def _symbol_names(elf: RawElf, dynstr: Shdr | None) -> list[int] | None:
    if dynstr is None:
        return None  # no section headers: the symbol count is unknown, be conservative
    tables = [s for s in elf.shdrs if s.sh_type in (SHT_DYNSYM, SHT_SYMTAB)
              and s.sh_link == dynstr.num]
    # The same table named twice is read once; tables that overlap otherwise are refused (each
    # would be read again: 65,535 headers over one large table multiply it).
    tables = list({(s.sh_offset, s.sh_size, s.sh_entsize): s for s in tables}.values())
    spans = sorted((s.sh_offset, s.file_end) for s in tables)
    if any(b[0] < a[1] for a, b in itertools.pairwise(spans)):
        raise elf.fail("symbol tables overlap")
    names = array("I")
    for sym in tables:
        if sym.sh_entsize not in (16, 24) or sym.sh_size % sym.sh_entsize:
            return None
        part = array("I")
        part.frombytes(elf.pread(sym.sh_size, sym.sh_offset))  # bounded by the file size
        # st_name is the first 32-bit word of Elf32_Sym (16 bytes) and Elf64_Sym (24 bytes).
        names.extend(part[:: sym.sh_entsize // 4])
    if (elf.bo == "<") != (sys.byteorder == "little"):
        names.byteswap()
    return names.tolist()


@dataclass(frozen=True, slots=True)
class VersionRef:
    """One .dynstr reference from a version record: where it is stored and its value."""

    field_off: int  # file offset of the 32-bit name field
    value: int
    is_file: bool  # vn_file (a library name) rather than a version name


def version_refs(elf: RawElf) -> list[VersionRef]:
    """Names of version needs (file and aux names) and version definitions (walked once)."""
    done = elf.cache.get("versions")
    if isinstance(done, list):
        return done
    refs = [*_walk_versions(elf, DT_VERNEED, DT_VERNEEDNUM, "HHIII", 2, (3, 4), "IHHII", 3, 4),
            *_walk_versions(elf, DT_VERDEF, DT_VERDEFNUM, "HHHHIII", None, (5, 6), "II", 0, 1)]
    elf.cache["versions"] = refs
    return refs


def _walk_versions(elf: RawElf, tag: int, numtag: int, fmt: str, name_field: int | None,
                   aux_next: tuple[int, int], auxfmt: str, aux_name: int, aux_link: int,
                   ) -> Iterator[VersionRef]:
    """Walk one chain, bounded by the file size, refusing cycles.

    The counts and the next-offsets come from the file: overlapping or cyclic records would
    otherwise make 65,536 x 65,535 steps. A record seen twice in the record chain, or an aux
    record seen twice in one record's aux chain, is a cycle (ElfError); linkers do share aux
    records between records (NVIDIA's version definitions do). All steps together are bounded
    by one per 8 bytes of the file.
    """
    addr, count = elf.dyn_value(tag), elf.dyn_value(numtag)
    if addr is None:
        return
    off = elf.vaddr_to_offset(addr)
    size, auxsize = struct.calcsize(fmt), struct.calcsize(auxfmt)
    window = _Window(elf, off)
    seen: set[int] = set()
    budget = [min(elf.size // 8 + 64, MAX_VERSION_RECORDS)]
    records = 0
    while True:  # glibc follows the next links until 0 and ignores the counts: so do we
        rec = window.unpack(elf.bo + fmt, size, off)
        _visit(elf, seen, off, budget)
        records += 1
        if name_field is not None:
            yield VersionRef(off + 4, rec[name_field], True)  # vn_file
        aux = off + rec[aux_next[0]]
        cnt = rec[1] if name_field is not None else rec[3]  # vn_cnt | vd_cnt
        seen_aux: set[int] = set()
        auxes = 0
        while cnt:
            arec = window.unpack(elf.bo + auxfmt, auxsize, aux)
            _visit(elf, seen_aux, aux, budget)
            auxes += 1
            # vna_name sits 8 bytes into Elf_Vernaux, vda_name first in Elf_Verdaux
            yield VersionRef(aux + (8 if name_field is not None else 0), arec[aux_name], False)
            if not arec[aux_link]:
                break
            aux += arec[aux_link]
        if auxes != cnt and name_field is not None:
            raise elf.fail(f"version need at {off:#x} counts {cnt} entries, links {auxes}")
        if not rec[aux_next[1]]:
            break
        off += rec[aux_next[1]]
    if records != count:
        # the loader reads the chain, tools read the count: they would disagree on the names
        raise elf.fail(f"version chain has {records} records, the dynamic count says {count}")


class _Window:
    """One read of the bytes where a record chain starts; records outside it are pread."""

    def __init__(self, elf: RawElf, start: int) -> None:
        self.elf, self.start = elf, start
        self.data = elf.pread(min(4096, elf.size - start), start)

    def unpack(self, fmt: str, size: int, off: int) -> tuple[int, ...]:
        rel = off - self.start
        if rel >= 0 and rel + size <= len(self.data):
            return struct.unpack_from(fmt, self.data, rel)
        return struct.unpack(fmt, self.elf.pread(size, off))


def _visit(elf: RawElf, seen: set[int], off: int, budget: list[int]) -> None:
    if off in seen:
        raise elf.fail(f"version records form a cycle at {off:#x}")
    if budget[0] <= 0:
        raise elf.fail("more version records than the file can hold")
    seen.add(off)
    budget[0] -= 1


def has_build_id(elf: RawElf, ph: Phdr) -> bool:
    """Does this PT_NOTE hold a GNU build-id? Each step advances at least 12 bytes."""
    if ph.p_filesz > MAX_NOTE_BYTES:
        return True
    data, pos = elf.pread(ph.p_filesz, ph.p_offset), 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(elf.bo + "III", data, pos)
        name = data[pos + 12:pos + 12 + namesz]
        if ntype == NT_GNU_BUILD_ID and name == b"GNU\0":
            return True
        pos += 12 + align_up(namesz, 4) + align_up(descsz, 4)
    return False
