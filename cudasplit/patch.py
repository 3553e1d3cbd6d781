"""Write DT_RUNPATH (or DT_RPATH) into ELF files, cheapest safe method first.

Tiers, tried in order by ``patcher="auto"``:

1. **in place** - the new string goes into ``.dynstr`` without moving anything: into the old
   string's slot (its bytes plus the unreferenced NULs that follow it), or into unreferenced
   NUL slack at the end of ``.dynstr``. Every reference into ``.dynstr`` is checked first
   (string-valued dynamic tags, symbol names, version need/def names): linkers merge string
   tails, so a slot that looks free may be the tail of another name.
2. **append** - a copy of ``.dynstr`` plus the new string plus ``SPARE_BYTES`` NULs goes to the
   end of the file, mapped by a new read-only ``PT_LOAD`` that keeps the file's own ``p_align``
   (64 KiB-page aarch64 kernels refuse smaller). ``DT_STRTAB``/``DT_STRSZ`` and the ``.dynstr``
   section header follow the copy. The spare bytes make a later rewrite go in place (tier 1).
   The new program header needs a slot; in order of preference:

   a. a ``PT_NULL`` header;
   b. zero padding right after the program header table, inside the first ``PT_LOAD`` (the
      table grows by one entry, nothing moves);
   c. a ``PT_NOTE`` header, only if another ``PT_NOTE`` remains or it holds no GNU build-id
      (a note duplicated by ``PT_GNU_PROPERTY`` is preferred: the loader reads that one);
      the note sections themselves stay in the file;
   d. shared objects only (no ``PT_INTERP``): the program header table itself moves into the
      new segment with one more entry. The kernel never maps a library; glibc and musl locate
      the table through ``e_phoff`` and the segment that covers it. Executables are excluded:
      kernels before 5.18 compute ``AT_PHDR`` assuming the table sits in the first segment.

   NVIDIA's libraries have one ``PT_NOTE`` (the build-id) and no padding, so they take (d):
   the build-id stays visible to tools that find it through the program headers.
3. **LIEF** with default parser and builder configs (the only ones that keep files intact),
   when tiers 1-2 do not apply. LIEF is slow, not thread-safe and holds the GIL: calls are
   serialised by a module lock; its output goes to a temporary file that replaces the original
   only after it has been verified.

Every written file is re-read and verified (the tag holds the value, the other tag is gone,
program headers are sane); a file that fails is restored byte-identically from an undo log
(the overwritten bytes plus the original length), and :class:`PatchError` is raised. Tiers 1-2
write at most the headers, the dynamic array and one copy of ``.dynstr``, never read a whole
file, so they cost well under a millisecond even on the 749 MB libcublasLt, and are safe to run
in threads on different files.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import sys
import tempfile
import threading
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from cudasplit.elf import ElfInfo, read_elf_info
from cudasplit.errors import ElfError, PatchError
from cudasplit.model import Kind

__all__ = ["SPARE_BYTES", "PatchResult", "rename_needed", "set_runpath"]

log = logging.getLogger(__name__)

SPARE_BYTES = 256  # NULs kept after an appended string so that later rewrites fit in place

_LIEF_LOCK = threading.Lock()  # LIEF is not thread-safe (lief-project/LIEF#1255)

# Dynamic tags
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# Every tag whose value is an offset into .dynstr (gABI + GNU extensions).
_STRING_TAGS = frozenset(
    {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 0x7FFFFFFD, 0x7FFFFFFF, 0x6FFFFEFA, 0x6FFFFEFB,
     0x6FFFFEFC}
)
_TAG_BY_NAME = {"RUNPATH": DT_RUNPATH, "RPATH": DT_RPATH}
_PATH_TAGS = (DT_RPATH, DT_RUNPATH)

PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 0, 1, 2, 3, 4, 6
PT_GNU_PROPERTY = 0x6474E553
PF_R = 4
SHT_SYMTAB, SHT_STRTAB, SHT_DYNSYM = 2, 3, 11
NT_GNU_BUILD_ID = 3

_MAX_NOTE_BYTES = 1 << 16  # notes bigger than this are not inspected (treated as build-id)
_MAX_VERSION_ENTRIES = 1 << 16  # guard against cyclic vn_next/vd_next chains


@dataclass(frozen=True, slots=True)
class PatchResult:
    """What :func:`set_runpath` did."""

    method: str  # "in-place" | "append" | "lief" | "unchanged"
    before: str | None  # old value of DT_RUNPATH or DT_RPATH, whichever was present
    before_tag: str | None  # "RUNPATH" | "RPATH" | None
    after: str
    tag: str  # "RUNPATH" | "RPATH": the tag written


# --------------------------------------------------------------------------- raw ELF structures

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


@dataclass(frozen=True, slots=True)
class Shdr:
    index: int
    sh_type: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_entsize: int


@dataclass(slots=True)
class RawElf:
    """The parts of an ELF file the writer needs, with file offsets, read via ``os.pread``."""

    path: str
    fd: int
    size: int
    bits: int  # 32 | 64
    bo: str  # struct byte order: "<" | ">"
    e_type: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    phdrs: list[Phdr]
    shdrs: list[Shdr]
    dyn_off: int  # file offset of the dynamic array
    dyn_cap: int  # entries that fit into PT_DYNAMIC
    dyn: list[tuple[int, int]]  # entries before the first DT_NULL
    strtab_addr: int
    strtab_off: int
    strsz: int

    # -- reading ------------------------------------------------------------------------------
    def pread(self, length: int, offset: int) -> bytes:
        """Bounds-checked read: a short read means a truncated or lying file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ElfError(f"{self.path}: corrupt ELF: {length} bytes at {offset:#x} lie past the"
                           f" end of the file ({self.size:#x})")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise ElfError(f"{self.path}: short read at {offset:#x}")
        return data

    def vaddr_to_offset(self, vaddr: int, length: int = 1) -> int:
        """File offset of a mapped address range (through PT_LOAD, like the loader)."""
        for ph in self.phdrs:
            if ph.p_type == PT_LOAD and ph.p_vaddr <= vaddr and vaddr + length <= ph.p_vaddr + \
                    ph.p_filesz:
                return ph.p_offset + vaddr - ph.p_vaddr
        raise ElfError(f"{self.path}: corrupt ELF: address {vaddr:#x} is not in any PT_LOAD")

    def dyn_value(self, tag: int) -> int | None:
        return next((v for t, v in self.dyn if t == tag), None)

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


def _read_header(path: str, fd: int, size: int) -> dict[str, int | str]:
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
    (_, e_type, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = \
        struct.unpack_from(fmt, head)
    if phentsize != struct.calcsize(_PHDR[bits][0]) or phnum == 0:
        raise ElfError(f"{path}: corrupt ELF header (program header size {phentsize}, "
                       f"count {phnum})")
    return {"bits": bits, "bo": bo, "e_type": e_type, "phoff": phoff, "shoff": shoff,
            "phentsize": phentsize, "phnum": phnum, "shentsize": shentsize, "shnum": shnum}


def _read_shdrs(elf: RawElf) -> list[Shdr]:
    """Section headers; [] when absent or malformed (sections are optional for the loader)."""
    fmt = elf.bo + _SHDR[elf.bits]
    if elf.shnum == 0 or elf.shentsize != struct.calcsize(fmt) or \
            elf.shoff + elf.shnum * elf.shentsize > elf.size:
        return []
    data = elf.pread(elf.shnum * elf.shentsize, elf.shoff)
    out = []
    for i, fields in enumerate(struct.iter_unpack(fmt, data)):
        _, sh_type, _, addr, offset, size, link, _, _, entsize = fields
        out.append(Shdr(i, sh_type, addr, offset, size, link, entsize))
    return out


def _read_dynamic(elf: RawElf) -> None:
    dyn = [ph for ph in elf.phdrs if ph.p_type == PT_DYNAMIC]
    if not dyn:
        raise PatchError(f"{elf.path}: no dynamic section (static or relocatable file)")
    ph = dyn[0]
    elf.dyn_off, elf.dyn_cap = ph.p_offset, ph.p_filesz // elf.dynent
    raw = elf.pread(elf.dyn_cap * elf.dynent, elf.dyn_off)
    for tag, val in struct.iter_unpack(elf.bo + _DYN[elf.bits], raw):
        if tag == DT_NULL:
            break
        elf.dyn.append((tag, val))
    else:
        raise ElfError(f"{elf.path}: corrupt ELF: dynamic array has no DT_NULL terminator")
    strtab, strsz = elf.dyn_value(DT_STRTAB), elf.dyn_value(DT_STRSZ)
    if strtab is None or strsz is None:
        raise ElfError(f"{elf.path}: corrupt ELF: DT_STRTAB or DT_STRSZ missing")
    elf.strtab_addr, elf.strsz = strtab, strsz
    elf.strtab_off = elf.vaddr_to_offset(strtab, max(strsz, 1))


def read_raw(path: str, fd: int) -> RawElf:
    """Parse headers, program headers, section headers and the dynamic array of an open file."""
    size = os.fstat(fd).st_size
    h = _read_header(path, fd, size)
    elf = RawElf(path=path, fd=fd, size=size, phdrs=[], shdrs=[], dyn_off=0, dyn_cap=0, dyn=[],
                 strtab_addr=0, strtab_off=0, strsz=0, **h)  # type: ignore[arg-type]
    table = elf.pread(elf.phnum * elf.phentsize, elf.phoff)
    elf.phdrs = [_unpack_phdr(elf.bits, elf.bo, table[i * elf.phentsize:(i + 1) * elf.phentsize])
                 for i in range(elf.phnum)]
    check_phdrs(elf)
    elf.shdrs = _read_shdrs(elf)
    _read_dynamic(elf)
    return elf


def check_phdrs(elf: RawElf) -> None:
    """Refuse program headers the loader would refuse (or that would make us write nonsense)."""
    loads = [ph for ph in elf.phdrs if ph.p_type == PT_LOAD]
    if not loads:
        raise ElfError(f"{elf.path}: corrupt ELF: no PT_LOAD segment")
    for ph in elf.phdrs:
        if ph.p_type != PT_NULL and ph.file_end > elf.size:
            raise ElfError(f"{elf.path}: corrupt ELF: segment at {ph.p_offset:#x} "
                           f"(+{ph.p_filesz:#x}) lies past the end of the file")
    for ph in loads:
        if ph.p_align & (ph.p_align - 1) or ph.p_filesz > ph.p_memsz:
            raise ElfError(f"{elf.path}: corrupt ELF: bad PT_LOAD at {ph.p_offset:#x}")
        if ph.p_align > 1 and ph.p_offset % ph.p_align != ph.p_vaddr % ph.p_align:
            raise ElfError(f"{elf.path}: corrupt ELF: PT_LOAD at {ph.p_offset:#x} breaks "
                           "offset/address congruence")
    for prev, cur in itertools.pairwise(loads):
        if cur.p_vaddr < prev.mem_end:
            raise ElfError(f"{elf.path}: corrupt ELF: PT_LOAD segments overlap or are unsorted "
                           f"({prev.p_vaddr:#x}, {cur.p_vaddr:#x})")


# --------------------------------------------------------------------------- .dynstr references

def _symbol_name_refs(elf: RawElf, dynstr: Shdr | None) -> Iterator[int] | None:
    """st_name of every symbol table that uses .dynstr, or None when that cannot be known."""
    if dynstr is None:
        return None  # no section headers: the symbol count is unknown, be conservative
    tables = [s for s in elf.shdrs if s.sh_type in (SHT_DYNSYM, SHT_SYMTAB)
              and s.sh_link == dynstr.index]
    names = array("I")
    for sym in tables:
        if sym.sh_entsize not in (16, 24) or sym.sh_size % sym.sh_entsize:
            return None
        part = array("I")
        part.frombytes(elf.pread(sym.sh_size, sym.sh_offset))
        # st_name is the first 32-bit word of Elf32_Sym (16 bytes) and Elf64_Sym (24 bytes).
        names.extend(part[:: sym.sh_entsize // 4])
    if (elf.bo == "<") != (sys.byteorder == "little"):
        names.byteswap()
    return iter(names)


def _version_refs(elf: RawElf) -> Iterator[int]:
    """Names of version needs (file and aux names) and version definitions."""
    yield from _walk_versions(elf, DT_VERNEED, DT_VERNEEDNUM, "HHIII", 2, (3, 4), "IHHII", 3, 4)
    yield from _walk_versions(elf, DT_VERDEF, DT_VERDEFNUM, "HHHHIII", None, (5, 6), "II", 0, 1)


def _walk_versions(elf: RawElf, tag: int, numtag: int, fmt: str, name_field: int | None,
                   aux_next: tuple[int, int], auxfmt: str, aux_name: int, aux_link: int,
                   ) -> Iterator[int]:
    addr, count = elf.dyn_value(tag), elf.dyn_value(numtag)
    if addr is None or not count:
        return
    off = elf.vaddr_to_offset(addr)
    for _ in range(min(count, _MAX_VERSION_ENTRIES)):
        rec = struct.unpack(elf.bo + fmt, elf.pread(struct.calcsize(fmt), off))
        if name_field is not None:
            yield rec[name_field]
        aux = off + rec[aux_next[0]]
        cnt = rec[1] if name_field is not None else rec[3]  # vn_cnt | vd_cnt
        for _ in range(min(cnt, _MAX_VERSION_ENTRIES)):
            arec = struct.unpack(elf.bo + auxfmt, elf.pread(struct.calcsize(auxfmt), aux))
            yield arec[aux_name]
            if not arec[aux_link]:
                break
            aux += arec[aux_link]
        if not rec[aux_next[1]]:
            break
        off += rec[aux_next[1]]


def _dynstr_section(elf: RawElf) -> Shdr | None:
    return next((s for s in elf.shdrs if s.sh_type == SHT_STRTAB and s.sh_offset ==
                 elf.strtab_off and s.sh_addr == elf.strtab_addr), None)


def _is_free(elf: RawElf, lo: int, hi: int) -> bool:
    """True when nothing but the path tags references .dynstr offsets in [lo, hi)."""
    if hi <= lo:
        return True
    forbidden = set(range(lo, hi))
    tags = (v for t, v in elf.dyn if t in _STRING_TAGS and t not in _PATH_TAGS)
    if not forbidden.isdisjoint(tags) or not forbidden.isdisjoint(_version_refs(elf)):
        return False
    names = _symbol_name_refs(elf, _dynstr_section(elf))
    return names is not None and forbidden.isdisjoint(names)


# --------------------------------------------------------------------------- planning

@dataclass(slots=True)
class Plan:
    """Byte writes that turn the file into the patched one."""

    method: str
    writes: list[tuple[int, bytes]] = field(default_factory=list)


def _new_dynamic(elf: RawElf, tag: int, str_off: int, strtab: tuple[int, int] | None,
                 ) -> list[tuple[int, int]] | None:
    """The dynamic array with one `tag` entry (where the first path tag was), or None if full."""
    out: list[tuple[int, int]] = []
    placed = False
    for t, v in elf.dyn:
        if t in _PATH_TAGS:
            if not placed:
                out.append((tag, str_off))
                placed = True
            continue  # a second path tag (the other kind) is dropped
        if strtab is not None and t == DT_STRTAB:
            v = strtab[0]
        elif strtab is not None and t == DT_STRSZ:
            v = strtab[1]
        out.append((t, v))
    if not placed:
        out.append((tag, str_off))  # uses one of the spare DT_NULLs GNU ld leaves
    if len(out) + 1 > elf.dyn_cap:
        return None
    return out + [(DT_NULL, 0)] * (elf.dyn_cap - len(out))


def _slot_in_place(elf: RawElf, dynstr: bytes, raw: bytes) -> int | None:
    """An offset in .dynstr where `raw` + NUL can go without disturbing another reference."""
    olds = sorted({v for t, v in elf.dyn if t in _PATH_TAGS})
    for off in olds:
        if off >= len(dynstr):
            continue
        end = dynstr.find(b"\0", off)
        if end < 0:
            continue
        old_len = end - off
        run_end = end  # extend over the NULs that follow (the spare bytes of an earlier append)
        while run_end + 1 < len(dynstr) and dynstr[run_end + 1] == 0:
            run_end += 1
        if off + len(raw) <= run_end and _is_free(elf, off, off + max(old_len, len(raw))):
            return off
    # Unreferenced slack at the end of .dynstr (after the last string's terminator).
    start = len(dynstr.rstrip(b"\0")) + 1
    if start + len(raw) < len(dynstr) and _is_free(elf, start, start + len(raw) + 1):
        return start
    return None


def _plan_in_place(elf: RawElf, raw: bytes, tag: int) -> Plan | None:
    dynstr = elf.pread(elf.strsz, elf.strtab_off)
    off = _slot_in_place(elf, dynstr, raw)
    if off is None:
        return None
    new_dyn = _new_dynamic(elf, tag, off, None)
    if new_dyn is None:
        return None
    end = dynstr.find(b"\0", off)
    span = max(end - off, len(raw)) + 1  # clear the rest of a longer old string
    text = raw.ljust(span, b"\0")
    return Plan("in-place", [(elf.strtab_off + off, text),
                             (elf.dyn_off, elf.pack_dyn(new_dyn))])


def _align_up(value: int, align: int) -> int:
    return value if align <= 1 else (value + align - 1) // align * align


def _has_build_id(elf: RawElf, ph: Phdr) -> bool:
    if ph.p_filesz > _MAX_NOTE_BYTES:
        return True
    data, pos = elf.pread(ph.p_filesz, ph.p_offset), 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(elf.bo + "III", data, pos)
        name = data[pos + 12:pos + 12 + namesz]
        if ntype == NT_GNU_BUILD_ID and name == b"GNU\0":
            return True
        pos += 12 + _align_up(namesz, 4) + _align_up(descsz, 4)
    return False


def _reusable_note(elf: RawElf) -> int | None:
    """Index of a PT_NOTE header that may become the new PT_LOAD (see module docstring, c)."""
    notes = [i for i, ph in enumerate(elf.phdrs) if ph.p_type == PT_NOTE]
    props = {(ph.p_offset, ph.p_filesz) for ph in elf.phdrs if ph.p_type == PT_GNU_PROPERTY}
    ranked: list[tuple[int, int]] = []
    for i in notes:
        ph = elf.phdrs[i]
        build_id = _has_build_id(elf, ph)
        if build_id and len(notes) < 2:
            continue
        rank = 0 if (ph.p_offset, ph.p_filesz) in props else 1 if not build_id else 2
        ranked.append((rank, i))
    return min(ranked)[1] if ranked else None


def _phdr_padding_free(elf: RawElf) -> bool:
    """Can the table grow by one entry into zero padding inside the segment that maps it?"""
    lo = elf.phoff + elf.phnum * elf.phentsize
    hi = lo + elf.phentsize
    first = next((ph for ph in elf.phdrs if ph.p_type == PT_LOAD), None)
    if first is None or not (first.p_offset <= elf.phoff and hi <= first.file_end) or hi > elf.size:
        return False
    users = [(s.sh_offset, s.sh_offset + s.sh_size) for s in elf.shdrs if s.sh_type != 8 and
             s.sh_size and s.index]  # 8 = SHT_NOBITS: occupies no file bytes
    users += [(ph.p_offset, ph.file_end) for ph in elf.phdrs
              if ph.p_type not in (PT_LOAD, PT_PHDR, PT_NULL) and ph.p_filesz]
    users.append((elf.shoff, elf.shoff + elf.shnum * elf.shentsize))
    if any(a < hi and lo < b for a, b in users):
        return False
    return elf.pread(hi - lo, lo) == b"\0" * (hi - lo)


def _choose_room(elf: RawElf, kind: Kind) -> tuple[str, int | None] | None:
    """Where the new PT_LOAD header goes: ("reuse", index) | ("grow", None) | ("move", None)."""
    null = next((i for i, ph in enumerate(elf.phdrs) if ph.p_type == PT_NULL), None)
    if null is not None:
        return ("reuse", null)
    if _phdr_padding_free(elf):
        return ("grow", None)
    note = _reusable_note(elf)
    if note is not None:
        return ("reuse", note)
    if kind == Kind.ELF_SHARED:
        return ("move", None)
    return None


def _new_phdr_list(elf: RawElf, room: tuple[str, int | None], load: Phdr) -> list[Phdr]:
    """Old headers (minus a reused one) with `load` right after the last PT_LOAD.

    The loader sizes its reservation from the first and last PT_LOAD in table order, so the
    new, highest segment must also come last among the PT_LOADs.
    """
    kept = [replace(ph) for i, ph in enumerate(elf.phdrs) if i != room[1]]
    last = max(i for i, ph in enumerate(kept) if ph.p_type == PT_LOAD)
    kept.insert(last + 1, load)
    return kept


def _plan_append(elf: RawElf, raw: bytes, tag: int, kind: Kind) -> Plan | None:
    room = _choose_room(elf, kind)
    if room is None:
        return None
    loads = [ph for ph in elf.phdrs if ph.p_type == PT_LOAD]
    align = max(max(ph.p_align for ph in loads), 1)
    start = _align_up(elf.size, 16)
    table_len = (elf.phnum + 1) * elf.phentsize if room[0] == "move" else 0
    old = elf.pread(elf.strsz, elf.strtab_off)
    new_str = old + raw + b"\0" * (1 + SPARE_BYTES)
    vaddr = _align_up(max(ph.mem_end for ph in loads), align) + start % align
    if vaddr + table_len + len(new_str) >= 1 << elf.bits:
        return None
    load = Phdr(PT_LOAD, PF_R, start, vaddr, vaddr, table_len + len(new_str),
                table_len + len(new_str), align)
    phdrs = _new_phdr_list(elf, room, load)
    str_vaddr = vaddr + table_len
    new_dyn = _new_dynamic(elf, tag, len(old), (str_vaddr, len(new_str)))
    if new_dyn is None:
        return None
    return _append_writes(elf, room, phdrs, load, new_str, new_dyn, str_vaddr)


def _append_writes(elf: RawElf, room: tuple[str, int | None], phdrs: list[Phdr], load: Phdr,
                   new_str: bytes, new_dyn: list[tuple[int, int]], str_vaddr: int) -> Plan:
    plan = Plan("append")
    table_off, table_vaddr = elf.phoff, None
    if room[0] == "move":
        table_off, table_vaddr = load.p_offset, load.p_vaddr
    for ph in phdrs:
        if ph.p_type == PT_PHDR:
            ph.p_filesz = ph.p_memsz = len(phdrs) * elf.phentsize
            if table_vaddr is not None:
                ph.p_offset, ph.p_vaddr, ph.p_paddr = table_off, table_vaddr, table_vaddr
    table = b"".join(elf.pack_phdr(ph) for ph in phdrs)
    pad = load.p_offset - elf.size
    body = table if room[0] == "move" else b""
    plan.writes.append((elf.size, b"\0" * pad + body + new_str))
    if room[0] != "move":
        plan.writes.append((elf.phoff, table))
    plan.writes.append((elf.dyn_off, elf.pack_dyn(new_dyn)))
    plan.writes.extend(_header_writes(elf, table_off, len(phdrs)))
    sec = _dynstr_section(elf)
    if sec is not None:  # keep section-based tools (strip, readelf -p) looking at the live copy
        plan.writes.append(_shdr_write(elf, sec, str_vaddr, load.p_offset + len(body),
                                       len(new_str)))
        plan.writes.extend(_section_symbol_writes(elf, sec, str_vaddr))
    return plan


def _section_symbol_writes(elf: RawElf, sec: Shdr, addr: int) -> list[tuple[int, bytes]]:
    """Move the STT_SECTION symbol of .dynstr in .symtab along with the section.

    Section symbols come first among the locals (ld emits one per section right after the null
    symbol), so only the first shnum + 1 entries are read, whatever the size of .symtab.
    """
    writes = []
    is64 = elf.bits == 64
    fmt = elf.bo + ("IBBHQQ" if is64 else "IIIBBH")
    for tab in (s for s in elf.shdrs if s.sh_type == SHT_SYMTAB and
                s.sh_entsize == struct.calcsize(fmt)):
        count = min(tab.sh_size // tab.sh_entsize, len(elf.shdrs) + 1)
        data = elf.pread(count * tab.sh_entsize, tab.sh_offset)
        for i, rec in enumerate(struct.iter_unpack(fmt, data)):
            info, shndx, value = (rec[1], rec[3], rec[4]) if is64 else (rec[3], rec[5], rec[1])
            if info & 0xF == 3 and shndx == sec.index and value == sec.sh_addr:  # STT_SECTION
                pos = tab.sh_offset + i * tab.sh_entsize + (8 if is64 else 4)
                writes.append((pos, struct.pack(elf.bo + ("Q" if is64 else "I"), addr)))
    return writes


def _header_writes(elf: RawElf, phoff: int, phnum: int) -> list[tuple[int, bytes]]:
    """New e_phoff and e_phnum (their offsets differ between ELF32 and ELF64)."""
    if elf.bits == 64:
        return [(32, struct.pack(elf.bo + "Q", phoff)), (56, struct.pack(elf.bo + "H", phnum))]
    return [(28, struct.pack(elf.bo + "I", phoff)), (44, struct.pack(elf.bo + "H", phnum))]


def _shdr_write(elf: RawElf, sec: Shdr, addr: int, offset: int, size: int) -> tuple[int, bytes]:
    """Rewrite sh_addr, sh_offset, sh_size of one section header (they are contiguous)."""
    word = "I" if elf.bits == 32 else "Q"
    pos = elf.shoff + sec.index * elf.shentsize + (12 if elf.bits == 32 else 16)
    return (pos, struct.pack(elf.bo + word * 3, addr, offset, size))


# --------------------------------------------------------------------------- writing and undo

class _Undo:
    """The bytes a patch overwrote plus the original length: enough to restore the file exactly."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.saved: list[tuple[int, bytes]] = []

    def write(self, offset: int, data: bytes) -> None:
        keep = min(len(data), max(self.size - offset, 0))
        if keep:
            self.saved.append((offset, os.pread(self.fd, keep, offset)))
        _pwrite_all(self.fd, data, offset)

    def restore(self) -> None:
        os.ftruncate(self.fd, self.size)
        for offset, data in reversed(self.saved):
            _pwrite_all(self.fd, data, offset)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


# --------------------------------------------------------------------------- verification

def _verify(path: str, raw: bytes, tag: str) -> None:
    """Re-read the written file; raise PatchError when it does not hold what was planned."""
    try:
        info = read_elf_info(path)
        with open(path, "rb") as stream:
            read_raw(path, stream.fileno())  # program headers: bounds, congruence, overlap
    except ElfError as exc:
        raise PatchError(f"{path}: patched file fails to parse: {exc}") from exc
    if info is None:
        raise PatchError(f"{path}: patched file is no longer ELF")
    value = raw.decode("utf-8", "surrogateescape")
    got, other = (info.runpath, info.rpath) if tag == "RUNPATH" else (info.rpath, info.runpath)
    if got != value or other is not None:
        raise PatchError(f"{path}: patched file reads back RUNPATH={info.runpath!r} "
                         f"RPATH={info.rpath!r}, expected {tag}={value!r}")


# --------------------------------------------------------------------------- tiers

def _native(path: str, raw: bytes, tag: str, kind: Kind, method: str | None) -> str | None:
    """Tiers 1-2. Returns the method used, or None when neither applies (file untouched)."""
    with open(path, "r+b") as stream:
        fd = stream.fileno()
        elf = read_raw(path, fd)
        dt = _TAG_BY_NAME[tag]
        plan = None
        if method in (None, "in-place"):
            plan = _plan_in_place(elf, raw, dt)
        if plan is None and method in (None, "append"):
            plan = _plan_append(elf, raw, dt, kind)
        if plan is None:
            return None
        undo = _Undo(fd, elf.size)
        try:
            for offset, data in plan.writes:
                undo.write(offset, data)
            _verify(path, raw, tag)
        except BaseException as exc:
            undo.restore()
            if isinstance(exc, PatchError):
                raise
            if isinstance(exc, OSError):
                raise PatchError(f"{path}: write failed ({exc.strerror or exc}); file restored"
                                 ) from exc
            raise
        return plan.method


def _lief(path: str, raw: bytes, tag: str) -> None:
    """Tier 3: LIEF with default configs into a temporary file, verified, then renamed over."""
    import lief  # slow to import and only needed for the odd file

    value = raw.decode("utf-8", "surrogateescape")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".cudasplit-", dir=folder)
    os.close(fd)
    try:
        with _LIEF_LOCK:
            _lief_rewrite(lief, path, tmp, value, tag)
        _verify(tmp, raw, tag)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise PatchError(f"{path}: LIEF rewrite failed ({exc.strerror or exc})") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _lief_rewrite(lief: object, path: str, out: str, value: str, tag: str) -> None:
    lief_mod: Any = lief
    lief_mod.logging.disable()
    try:
        binary = lief_mod.ELF.parse(path)  # default ParserConfig: anything else loses data
        if binary is None:
            raise PatchError(f"{path}: LIEF cannot parse the file")
        binary.remove(lief_mod.ELF.DynamicEntry.TAG.RUNPATH)
        binary.remove(lief_mod.ELF.DynamicEntry.TAG.RPATH)
        entry = (lief_mod.ELF.DynamicEntryRunPath(value) if tag == "RUNPATH"
                 else lief_mod.ELF.DynamicEntryRpath(value))
        binary.add(entry)
        binary.write(out)  # default Builder config: partial configs corrupt symbol versions
    except PatchError:
        raise
    except Exception as exc:  # LIEF raises assorted native errors
        raise PatchError(f"{path}: LIEF failed ({type(exc).__name__}: {exc})") from exc


# --------------------------------------------------------------------------- public API

_PATCHERS = ("auto", "in-place", "append", "native", "lief")


def _before(info: ElfInfo, tag: str) -> tuple[str | None, str | None]:
    """The old value, preferring the tag being written when both are present."""
    order = [("RUNPATH", info.runpath), ("RPATH", info.rpath)]
    if tag == "RPATH":
        order.reverse()
    for name, value in order:
        if value is not None:
            return value, name
    return None, None


def set_runpath(path: str | os.PathLike[str], value: str, *, tag: str = "RUNPATH",
                patcher: str = "auto") -> PatchResult:
    """Make `path` carry exactly one search-path tag, `tag`, holding `value`.

    ``patcher``: "auto" (tiers 1, 2, then 3), "lief" (tier 3 only), or for tests and callers
    that must not fall back to LIEF: "native" (tiers 1-2), "in-place", "append" (one tier).
    A forced tier that does not apply raises PatchError with the file untouched.
    Raises ElfError when the file is not ELF or is damaged (file untouched), PatchError when
    it cannot be written (file restored), ValueError for a value with NUL or a bad argument.
    """
    name = os.fspath(path)
    if tag not in _TAG_BY_NAME or patcher not in _PATCHERS:
        raise ValueError(f"tag must be RUNPATH or RPATH and patcher one of {_PATCHERS}")
    raw = value.encode("utf-8", "surrogateescape")
    if b"\0" in raw:
        raise ValueError("a search path cannot contain NUL")
    info = read_elf_info(name)
    if info is None:
        raise ElfError(f"{name}: not an ELF file")
    if not info.has_dynamic:
        raise PatchError(f"{name}: no dynamic section (static or relocatable file)")
    before, before_tag = _before(info, tag)
    result = PatchResult("unchanged", before, before_tag, value, tag)
    current, other = (info.runpath, info.rpath) if tag == "RUNPATH" else (info.rpath, info.runpath)
    if current == value and other is None:
        return result
    method = None
    if patcher != "lief":
        forced = None if patcher in ("auto", "native") else patcher
        method = _native(name, raw, tag, info.kind, forced)
    if method is None:
        if patcher not in ("auto", "lief"):
            raise PatchError(f"{name}: patcher {patcher!r} does not apply (no room in .dynstr, "
                             "no spare DT_NULL or program header slot)")
        log.warning("%s: no room for an in-place or appended string table, using LIEF", name)
        _lief(name, raw, tag)
        method = "lief"
    log.debug("%s: %s=%r via %s (was %s=%r)", name, tag, value, method, before_tag, before)
    return replace(result, method=method)


# --------------------------------------------------------------------------- DT_NEEDED renames

def rename_needed(path: str | os.PathLike[str], old: str, new: str) -> bool:
    """Rename the DT_NEEDED entry ``old`` to ``new`` in place, like ``patchelf --replace-needed``
    (nsight_systems' ``libqtiff.so`` wants ``libtiff.so.5``; distributions ship ``libtiff.so``).

    The new name overwrites the old string in ``.dynstr``, so it must not be longer, and no
    other reference may share the old string's bytes (a version need's file name pointing at
    the same string is renamed with it, as patchelf does). Returns False when the file does not
    need ``old``. Raises PatchError when it cannot be done in place (file untouched) or the
    result does not read back (file restored), ElfError for a damaged file.
    """
    name = os.fspath(path)
    raw_old, raw_new = old.encode(), new.encode()
    if not raw_new or b"\0" in raw_new or b"\0" in raw_old:
        raise ValueError("library names must be non-empty and contain no NUL")
    with open(name, "r+b") as stream:
        fd = stream.fileno()
        elf = read_raw(name, fd)
        dynstr = elf.pread(elf.strsz, elf.strtab_off)
        slots = sorted({v for t, v in elf.dyn if t == DT_NEEDED
                        and dynstr[v:v + len(raw_old) + 1] == raw_old + b"\0"})
        if not slots:
            return False
        if len(raw_new) > len(raw_old):
            raise PatchError(f"{name}: cannot rename NEEDED {old!r} to the longer {new!r} in place")
        if not all(_only_the_library_refers(elf, off, len(raw_old)) for off in slots):
            raise PatchError(f"{name}: the string {old!r} is shared with another name; "
                             "NEEDED not renamed")
        undo = _Undo(fd, elf.size)
        try:
            for off in slots:
                undo.write(elf.strtab_off + off, raw_new.ljust(len(raw_old) + 1, b"\0"))
            _verify_needed(name, old, new)
        except BaseException:
            undo.restore()
            raise
    return True


def _only_the_library_refers(elf: RawElf, off: int, length: int) -> bool:
    """Nothing points into [off, off+length] except DT_NEEDED / version-need file names at off."""
    inside = range(off + 1, off + length + 1)
    tags = [v for t, v in elf.dyn if t in _STRING_TAGS and t != DT_NEEDED]
    needed = [v for t, v in elf.dyn if t == DT_NEEDED]
    names = _symbol_name_refs(elf, _dynstr_section(elf))
    if names is None:
        return False  # no section headers: symbol names unknown, be conservative
    symbols = list(names)
    if off in tags or off in symbols:
        return False
    return not any(r in inside for r in (*tags, *needed, *symbols, *_version_refs(elf)))


def _verify_needed(path: str, old: str, new: str) -> None:
    try:
        info = read_elf_info(path)
    except ElfError as exc:
        raise PatchError(f"{path}: renamed file fails to parse: {exc}") from exc
    if info is None or new not in info.needed or old in info.needed:
        raise PatchError(f"{path}: NEEDED rename {old!r} -> {new!r} did not read back")
