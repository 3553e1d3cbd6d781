"""The one low-level ELF reader: headers, program/section headers, the dynamic array, strings.

Both the facts (:mod:`cudasplit._elf`) and the writer (:mod:`cudasplit._patch`) read through this
module. Every read is an ``os.pread`` bounded by the file size; every walk over file-controlled
counts and offsets (version need/def chains, symbol tables, notes) is bounded by the file size
and detects cycles, so a small hostile file cannot make a walk run long or allocate much.
Failures raise :class:`~cudasplit.errors.ElfError` with a one-line message naming the file.
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from cudasplit.errors import ElfError

# Dynamic tags
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 0, 1, 4, 5, 6, 10
DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29
DT_GNU_HASH, DT_VERSYM = 0x6FFFFEF5, 0x6FFFFFF0
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# Every tag whose value is an offset into .dynstr (gABI + GNU extensions).
STRING_TAGS = frozenset(
    {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 0x7FFFFFFD, 0x7FFFFFFF, 0x6FFFFEFA, 0x6FFFFEFB,
     0x6FFFFEFC}
)
PATH_TAGS = (DT_RPATH, DT_RUNPATH)

PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 0, 1, 2, 3, 4, 6
PT_GNU_PROPERTY = 0x6474E553
PF_R = 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_HASH, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = \
    1, 2, 3, 5, 7, 8, 11
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = \
    0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
NT_GNU_BUILD_ID = 3
PAGE = 0x1000  # the smallest page size of the targets (x86_64, aarch64 4K, ppc64le 4K/64K)

MAX_NOTE_BYTES = 1 << 16  # notes bigger than this are not inspected (treated as build-id)

_EHDR = {32: "16sHHIIIIIHHHHHH", 64: "16sHHIQQQIHHHHHH"}
_PHDR_FIELDS = ("p_type", "p_flags", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz",
                "p_align")
# Field (index into _PHDR_FIELDS) at each stored position: ELF32 stores p_flags after p_memsz,
# ELF64 right after p_type (for alignment).
_PHDR = {32: ("IIIIIIII", (0, 2, 3, 4, 5, 6, 1, 7)), 64: ("IIQQQQQQ", (0, 1, 2, 3, 4, 5, 6, 7))}
_SHDR = {32: "IIIIIIIIII", 64: "IIQQQQIIQQ"}
_DYN = {32: "iI", 64: "qQ"}


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

    def string_at(self, offset: int, limit: int) -> bytes:
        """NUL-terminated bytes at file `offset`, which must end before file offset `limit`."""
        out = b""
        while True:
            want = min(4096, limit - offset - len(out))
            if want <= 0:
                raise self.fail(f"unterminated string at {offset:#x}")
            chunk = self.pread(want, offset + len(out))
            end = chunk.find(b"\0")
            if end >= 0:
                return out + chunk[:end]
            out += chunk

    def dynstr_at(self, value: int) -> bytes:
        """The .dynstr string at `value`; it must start and end inside DT_STRSZ."""
        if value >= self.strsz:
            raise self.fail(f"string offset {value:#x} beyond DT_STRSZ {self.strsz:#x}")
        table = self.dynstr()
        end = table.find(b"\0", value)
        if end < 0:
            raise self.fail(f"string at {value:#x} runs past DT_STRSZ {self.strsz:#x}")
        return table[value:end]

    # -- packing ------------------------------------------------------------------------------
    def pack_phdr(self, ph: Phdr) -> bytes:
        fmt, order = _PHDR[self.bits]
        values = [getattr(ph, _PHDR_FIELDS[i]) for i in order]
        return struct.pack(self.bo + fmt, *values)

    def pack_dyn(self, entries: Iterable[tuple[int, int]]) -> bytes:
        fmt = self.bo + _DYN[self.bits]
        return b"".join(struct.pack(fmt, t, v) for t, v in entries)

    @property
    def dynent(self) -> int:
        return struct.calcsize(_DYN[self.bits])


def _unpack_phdr(elf_bits: int, bo: str, data: bytes) -> Phdr:
    fmt, order = _PHDR[elf_bits]
    raw = struct.unpack(bo + fmt, data[: struct.calcsize(fmt)])
    values = {_PHDR_FIELDS[i]: raw[pos] for pos, i in enumerate(order)}
    return Phdr(**values)


def _read_header(path: str, fd: int, strict: bool = True) -> dict[str, int | str]:
    head = os.pread(fd, 64, 0)
    if head[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
        raise ElfError(f"{path}: corrupt ELF header (class/data byte)")
    bits = 32 if head[4] == 1 else 64
    bo = "<" if head[5] == 1 else ">"
    fmt = bo + _EHDR[bits]
    if len(head) < struct.calcsize(fmt):
        raise ElfError(f"{path}: truncated ELF header")
    (_, e_type, e_machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = \
        struct.unpack_from(fmt, head)
    if strict and phnum == 0:
        from cudasplit.errors import PatchError
        raise PatchError(f"{path}: no dynamic section (no program headers: relocatable file)")
    if phnum and phentsize != struct.calcsize(_PHDR[bits][0]):
        raise ElfError(f"{path}: corrupt ELF header (program header size {phentsize}, "
                       f"count {phnum})")
    return {"bits": bits, "bo": bo, "e_type": e_type, "e_machine": e_machine, "phoff": phoff,
            "shoff": shoff, "phentsize": phentsize, "phnum": phnum, "shentsize": shentsize,
            "shnum": shnum}


def _read_shdrs(elf: RawElf) -> list[Shdr]:
    """Section headers; [] when absent or malformed (sections are optional for the loader)."""
    fmt = elf.bo + _SHDR[elf.bits]
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
    return out


def read_dynamic(elf: RawElf, strict: bool = True) -> None:
    """Fill ``dyn``/``strtab_*``/``strsz``; refuse what the writer could not edit safely
    (``strict``; the facts reader only needs what the loader reads)."""
    dyn = [ph for ph in elf.phdrs if ph.p_type == PT_DYNAMIC]
    if not dyn:
        elf.dyn = None
        return
    ph = dyn[0]
    elf.dyn_off, elf.dyn_cap = ph.p_offset, ph.p_filesz // elf.dynent
    raw = elf.pread(elf.dyn_cap * elf.dynent, elf.dyn_off)
    entries: list[tuple[int, int]] = []
    for tag, val in struct.iter_unpack(elf.bo + _DYN[elf.bits], raw):
        if tag == DT_NULL:
            break
        entries.append((tag, val))
    else:
        raise elf.fail("dynamic array has no DT_NULL terminator")
    elf.dyn = entries
    tags = [t for t, _ in entries]
    if not strict:
        if any(t in STRING_TAGS for t in tags):
            _locate_strtab(elf, tags)
        return
    if tags.count(DT_STRTAB) > 1 or tags.count(DT_STRSZ) > 1:
        # glibc uses the last, readelf the first: any edit would be read differently.
        raise elf.fail("more than one DT_STRTAB or DT_STRSZ")
    _check_addresses(elf, entries)
    _check_hash_tables(elf)
    _locate_strtab(elf, tags)


def _locate_strtab(elf: RawElf, tags: list[int]) -> None:
    # glibc uses the last DT_STRTAB/DT_STRSZ (strict mode refuses two)
    strtab = next((v for t, v in reversed(elf.entries) if t == DT_STRTAB), None)
    strsz = next((v for t, v in reversed(elf.entries) if t == DT_STRSZ), None)
    if strtab is None or strsz is None:
        if any(t in STRING_TAGS for t in tags):
            raise elf.fail("DT_STRTAB or DT_STRSZ missing")
        return
    elf.strtab_addr, elf.strsz = strtab, strsz
    elf.strtab_off = elf.vaddr_to_offset(strtab, max(strsz, 1))


# Tags whose value is an address the loader dereferences: PLTGOT HASH STRTAB SYMTAB RELA INIT
# FINI REL JMPREL INIT_ARRAY FINI_ARRAY RELR GNU_HASH VERSYM VERDEF VERNEED
ADDRESS_TAGS = (3, 4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 36, DT_GNU_HASH, DT_VERSYM, DT_VERDEF,
                DT_VERNEED)


def _check_addresses(elf: RawElf, entries: list[tuple[int, int]]) -> None:
    """Every address tag must point into a PT_LOAD: one that does not reads whatever happens to
    be mapped there (the ELF header, a neighbour), and any edit would change what it reads."""
    spans = [(ph.p_vaddr, ph.mem_end) for ph in elf.phdrs if ph.p_type == PT_LOAD]
    ehdr, table_end = (64 if elf.bits == 64 else 52), elf.phoff + elf.phnum * elf.phentsize
    for tag, value in entries:
        if tag not in ADDRESS_TAGS:
            continue
        if not any(lo <= value < hi for lo, hi in spans):
            raise elf.fail(f"dynamic tag {tag:#x} points at {value:#x}, outside every PT_LOAD")
        try:
            offset = elf.vaddr_to_offset(value)
        except ElfError:
            continue  # .bss-like memory: not file bytes
        if offset < ehdr or elf.phoff <= offset < table_end:
            # the writer rewrites the headers: a table "found" there would change under it
            raise elf.fail(f"dynamic tag {tag:#x} points into the ELF or program headers")


def _check_hash_tables(elf: RawElf) -> None:
    """The hash tables must fit the segment that maps them (glibc reads them unchecked: a
    table that reaches outside reads whatever is mapped next to the object)."""
    word = elf.bits // 8
    for tag in (DT_HASH, DT_GNU_HASH):
        addr = elf.dyn_value(tag)
        if addr is None:
            continue
        load = next((ph for ph in elf.phdrs if ph.p_type == PT_LOAD and
                     ph.p_vaddr <= addr < ph.p_vaddr + ph.p_filesz), None)
        if load is None:
            raise elf.fail(f"hash table at {addr:#x} is not file-backed")
        room = load.p_vaddr + load.p_filesz - addr
        head = elf.pread(min(16, room), load.p_offset + addr - load.p_vaddr)
        if tag == DT_HASH:
            nbucket, nchain = struct.unpack_from(elf.bo + "II", head.ljust(8, b"\0"))
            need = 8 + 4 * (nbucket + nchain)
        else:
            nbuckets, _, bloom, _ = struct.unpack_from(elf.bo + "IIII", head.ljust(16, b"\0"))
            if bloom & (bloom - 1) or not bloom:
                raise elf.fail(f"GNU hash bloom size {bloom} is not a power of two")
            need = 16 + bloom * word + 4 * nbuckets
        if need > room:
            raise elf.fail(f"hash table at {addr:#x} reaches past its segment")


def read_raw(path: str, fd: int, *, need_dynamic: bool = True, strict: bool = True) -> RawElf:
    """Parse headers, program headers, section headers and the dynamic array of an open file.

    ``strict`` (the writer): refuse what the loader would refuse or what could not be edited
    safely, and read the section headers. Not strict (the facts of :mod:`cudasplit._elf`):
    files without program headers (``.o``) are fine, only the dynamic array is read.
    """
    size = os.fstat(fd).st_size
    h = _read_header(path, fd, strict)
    elf = RawElf(path=path, fd=fd, size=size, phdrs=[], shdrs=[],
                 **h)  # type: ignore[arg-type]
    table = elf.pread(elf.phnum * elf.phentsize, elf.phoff)
    elf.phdrs = [_unpack_phdr(elf.bits, elf.bo, table[i * elf.phentsize:(i + 1) * elf.phentsize])
                 for i in range(elf.phnum)]
    if strict:
        if elf.e_type not in (2, 3):  # LIEF aborts on e_type 7 (issue 15.3); ld.so loads neither
            raise elf.fail(f"e_type {elf.e_type} is neither an executable nor a shared object")
        check_phdrs(elf)
        elf.shdrs = _read_shdrs(elf)
    read_dynamic(elf, strict)
    if need_dynamic and elf.dyn is None:
        from cudasplit.errors import PatchError
        raise PatchError(f"{path}: no dynamic section (static or relocatable file)")
    return elf


_INSIDE_TYPES = (PT_DYNAMIC, PT_INTERP, 7, 0x6474E550, 0x6474E552)  # TLS, EH_FRAME, RELRO


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
        if ph.p_type in _INSIDE_TYPES and ph.p_memsz and not any(
                ld.p_vaddr <= ph.p_vaddr and ph.mem_end <= ld.mem_end for ld in loads):
            raise elf.fail(f"segment type {ph.p_type:#x} at {ph.p_vaddr:#x} lies outside every "
                           "PT_LOAD")
    for prev, cur in itertools.pairwise(loads):
        if cur.p_vaddr < prev.mem_end:
            raise elf.fail(f"PT_LOAD segments overlap or are unsorted ({prev.p_vaddr:#x}, "
                           f"{cur.p_vaddr:#x})")


# --------------------------------------------------------------------------- .dynstr references

def dynstr_section(elf: RawElf) -> Shdr | None:
    return next((s for s in elf.shdrs if s.sh_type == SHT_STRTAB and s.sh_offset ==
                 elf.strtab_off and s.sh_addr == elf.strtab_addr), None)


def symbol_name_refs(elf: RawElf, dynstr: Shdr | None) -> list[int] | None:
    """st_name of every symbol table that uses .dynstr, or None when that cannot be known
    (read once per parsed file)."""
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
    budget = [elf.size // 8 + 64]
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


def align_up(value: int, align: int) -> int:
    return value if align <= 1 else (value + align - 1) // align * align


# --------------------------------------------------------------------------- names in use

@dataclass(frozen=True, slots=True)
class DynNames:
    """Every dynamic string a loader reads by name: what a correct edit must keep."""

    needed: tuple[bytes, ...]
    soname: tuple[bytes, ...]
    runpath: tuple[bytes, ...]
    rpath: tuple[bytes, ...]
    other_tags: tuple[tuple[int, bytes], ...]  # DT_AUXILIARY, DT_FILTER, ...
    versions: tuple[tuple[bool, bytes], ...]  # (is_file, name) in walk order


def dyn_names(elf: RawElf) -> DynNames:
    """Read every dynamic string name; ElfError when one lies outside DT_STRSZ."""
    by_tag: dict[int, list[bytes]] = {}
    others: list[tuple[int, bytes]] = []
    for t, v in elf.entries:
        if t in STRING_TAGS:
            name = elf.dynstr_at(v)
            by_tag.setdefault(t, []).append(name)
            if t not in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                others.append((t, name))
    versions = tuple((r.is_file, elf.dynstr_at(r.value)) for r in version_refs(elf))
    return DynNames(tuple(by_tag.get(DT_NEEDED, [])), tuple(by_tag.get(DT_SONAME, [])),
                    tuple(by_tag.get(DT_RUNPATH, [])), tuple(by_tag.get(DT_RPATH, [])),
                    tuple(others), versions)


def open_raw(path: str, *, need_dynamic: bool = True) -> RawElf:
    """``read_raw`` on a file opened read-only (the descriptor is closed on error)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_raw(path, fd, need_dynamic=need_dynamic)
    except BaseException:
        os.close(fd)
        raise
