"""Byte-level plans that apply one ELF edit: in place (tier 1) or appended (tier 2).

A plan is a list of ``(offset, bytes)`` writes computed from a parsed :class:`RawElf`; nothing is
written here. See :mod:`cudasplit._patch` for the tiers, the undo log and the verification.

Where the appended segment's program header goes, in order of preference:

a. a ``PT_NULL`` header;
b. zero padding right after the program header table, inside the first ``PT_LOAD`` (the table
   grows by one entry, nothing moves);
c. a ``PT_NOTE`` header (one duplicated by ``PT_GNU_PROPERTY`` or without build-id first; the
   note sections stay in the file). NVIDIA's libraries have exactly one, the build-id: it
   becomes the new ``PT_LOAD`` (measured to survive ``strip`` on 24/24 NVIDIA files);
d. the table grows in place over the sections that follow it (``.interp``, ``.note.*``,
   ``.hash``, ``.gnu.hash``, ``.dynsym``, ``.gnu.version*``, ``.dynstr``), which move into the
   new segment; the dynamic tags, program and section headers that point at them follow. This
   is what ``patchelf`` does, and unlike moving the table itself to the end of the file
   (what this writer did before), ``strip``/``objcopy`` keep the result loadable: they lay
   out the segment holding the program headers themselves and shifted everything after.
"""

from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass, field

from cudasplit._elfio import (
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_NULL,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERNEED,
    DT_VERSYM,
    PAGE,
    PATH_TAGS,
    PF_R,
    PT_GNU_PROPERTY,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_NULL,
    PT_PHDR,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_SYMTAB,
    STRING_TAGS,
    Phdr,
    RawElf,
    Shdr,
    align_up,
    dynstr_section,
    has_build_id,
    symbol_name_refs,
    version_refs,
)
from cudasplit.errors import ElfError, PatchError

SPARE_BYTES = 256  # NULs kept after an appended string so that later rewrites fit in place
_MAX_EVICT_BYTES = 8 << 20  # sections moved to make room for one program header, at most

# Sections that may move into the new segment, with the dynamic tag that holds their address.
_EVICT_TAG = {SHT_HASH: DT_HASH, SHT_GNU_HASH: DT_GNU_HASH, SHT_DYNSYM: DT_SYMTAB,
              SHT_GNU_VERSYM: DT_VERSYM, SHT_GNU_VERNEED: DT_VERNEED, SHT_GNU_VERDEF: DT_VERDEF}


@dataclass(frozen=True, slots=True)
class Want:
    """An :class:`~cudasplit._elfedit.ElfEdit` in bytes (``path_tag`` is DT_RUNPATH/DT_RPATH)."""

    runpath: bytes | None
    path_tag: int
    interp: bytes | None
    renames: tuple[tuple[bytes, bytes], ...]
    adds: tuple[bytes, ...]


@dataclass(slots=True)
class Plan:
    """Byte writes that turn the file into the patched one."""

    method: str
    writes: list[tuple[int, bytes]] = field(default_factory=list)


# --------------------------------------------------------------------------- references

class _Refs:
    """Every offset into .dynstr something refers to (computed once per plan)."""

    def __init__(self, elf: RawElf) -> None:
        self.elf = elf
        self.path = {v for t, v in elf.entries if t in PATH_TAGS}
        self.needed = [v for t, v in elf.entries if t == DT_NEEDED]
        self.tags = [v for t, v in elf.entries if t in STRING_TAGS and t not in PATH_TAGS
                     and t != DT_NEEDED]
        self.versions = version_refs(elf)
        self.symbols = symbol_name_refs(elf, dynstr_section(elf))

    def all_but_path(self) -> list[int] | None:
        """Every reference except the path tags, sorted; None when symbol names are unknown."""
        if self.symbols is None:
            return None
        return sorted({*self.needed, *self.tags, *(r.value for r in self.versions),
                       *self.symbols})


def _free(dynstr: bytes, refs: list[int] | None, lo: int, hi: int) -> bool:
    """Can bytes [lo, hi) of .dynstr be overwritten without changing any other name?

    No reference (``refs``, sorted) may point inside, and no string may run into ``lo`` from
    before it: linkers merge tails, so an RPATH can be the tail of another name (the byte before
    must be NUL).
    """
    if refs is None or (lo > 0 and dynstr[lo - 1] != 0):
        return False
    i = bisect.bisect_left(refs, lo)
    return i == len(refs) or refs[i] >= hi


_NOT_NUL = re.compile(rb"[^\0]")


# --------------------------------------------------------------------------- in place

def plan_in_place(elf: RawElf, want: Want) -> Plan | None:
    """Tier 1: every new string fits into .dynstr without moving anything; None otherwise."""
    dynstr = elf.dynstr()
    refs = _Refs(elf)
    plan = Plan("in-place")
    others = refs.all_but_path()
    for old, new in want.renames:
        if not _rename_in_place(elf, dynstr, refs, old, new, plan):
            return None
    slack = len(dynstr.rstrip(b"\0")) + 1
    path_off = None
    if want.runpath is not None:
        found = _path_slot(dynstr, refs, others, want.runpath, slack)
        if found is None:
            return None
        path_off, slack = found
        end = dynstr.find(b"\0", path_off)
        span = max(end - path_off, len(want.runpath)) + 1  # clear the rest of a longer old one
        plan.writes.append((elf.strtab_off + path_off, want.runpath.ljust(span, b"\0")))
    add_offs = []
    for name in want.adds:
        if slack + len(name) >= len(dynstr) or not _free(dynstr, others, slack,
                                                          slack + len(name) + 1):
            return None
        plan.writes.append((elf.strtab_off + slack, name + b"\0"))
        add_offs.append(slack)
        slack += len(name) + 1
    if want.interp is not None and not _interp_in_place(elf, want.interp, plan):
        return None
    new_dyn = new_dynamic(elf, want, path_off, None, {}, add_offs)
    if new_dyn is None:
        return None
    plan.writes.append((elf.dyn_off, elf.pack_dyn(new_dyn)))
    return plan


def _path_slot(dynstr: bytes, refs: _Refs, others: list[int] | None, raw: bytes,
               slack: int) -> tuple[int, int] | None:
    """(offset for the search path, new slack start): the old slot, or the slack at the end."""
    for off in sorted(refs.path):
        end = dynstr.find(b"\0", off) if off < len(dynstr) else -1
        if end < 0:
            continue
        # extend over the NULs that follow (the spare bytes of an earlier append)
        nxt = _NOT_NUL.search(dynstr, end + 1)
        run_end = (nxt.start() if nxt else len(dynstr)) - 1
        if off + len(raw) <= run_end and _free(dynstr, others, off, off + max(end - off,
                                                                              len(raw)) + 1):
            return off, max(slack, off + len(raw) + 1)
    if slack + len(raw) < len(dynstr) and _free(dynstr, others, slack, slack + len(raw) + 1):
        return slack, slack + len(raw) + 1
    return None


def _rename_in_place(elf: RawElf, dynstr: bytes, refs: _Refs, old: bytes, new: bytes,
                     plan: Plan) -> bool:
    """Overwrite every DT_NEEDED/vn_file string equal to `old` (not longer; not shared)."""
    slots = _name_slots(dynstr, refs, old)
    if not slots:
        return True  # nothing to rename
    if len(new) > len(old):
        return False
    lib_refs = set(refs.needed) | {r.value for r in refs.versions if r.is_file}
    other = [*refs.tags, *(r.value for r in refs.versions if not r.is_file), *refs.path,
             *(refs.symbols or [])]
    for off in slots:
        inside = range(off + 1, off + len(old) + 1)
        if refs.symbols is None or off in other or any(r in inside for r in other) or \
                any(r in inside for r in lib_refs) or (off > 0 and dynstr[off - 1] != 0):
            return False
        plan.writes.append((elf.strtab_off + off, new.ljust(len(old) + 1, b"\0")))
    return True


def _name_slots(dynstr: bytes, refs: _Refs, old: bytes) -> list[int]:
    """Offsets of DT_NEEDED entries and version-need file names that read `old`."""
    cands = set(refs.needed) | {r.value for r in refs.versions if r.is_file}
    return sorted(off for off in cands if dynstr[off:off + len(old) + 1] == old + b"\0")


def _interp_in_place(elf: RawElf, interp: bytes, plan: Plan) -> bool:
    ph = next(ph for ph in elf.phdrs if ph.p_type == PT_INTERP)
    if len(interp) + 1 > ph.p_filesz:
        return False
    # The kernel reads p_filesz bytes and wants the last one NUL: pad, keep the size.
    plan.writes.append((ph.p_offset, interp.ljust(ph.p_filesz, b"\0")))
    return True


def new_dynamic(elf: RawElf, want: Want, path_off: int | None, strtab: tuple[int, int] | None,
                moved: dict[int, int], add_offs: list[int],
                needed_map: dict[int, int] | None = None) -> list[tuple[int, int]] | None:
    """The new dynamic array (padded with DT_NULL to its old size), or None if it is full.

    The path tag takes the place of the first old path tag (the other kind is dropped); new
    DT_NEEDED entries follow the last old one (search order of the old ones is kept).
    """
    out: list[tuple[int, int]] = []
    placed = want.runpath is None
    for t, v in elf.entries:
        if t in PATH_TAGS and want.runpath is not None:
            if not placed:
                out.append((want.path_tag, path_off or 0))
                placed = True
            continue
        out.append((t, _retarget(t, v, strtab, moved, needed_map)))
    if not placed:
        out.append((want.path_tag, path_off or 0))  # uses one of the spare DT_NULLs ld leaves
    if add_offs:
        last = max((i for i, (t, _) in enumerate(out) if t == DT_NEEDED), default=-1)
        out[last + 1:last + 1] = [(DT_NEEDED, off) for off in add_offs]
    if len(out) + 1 > elf.dyn_cap:
        return None
    return out + [(DT_NULL, 0)] * (elf.dyn_cap - len(out))


def _retarget(t: int, v: int, strtab: tuple[int, int] | None, moved: dict[int, int],
              needed_map: dict[int, int] | None) -> int:
    if strtab is not None and t == DT_STRTAB:
        return strtab[0]
    if strtab is not None and t == DT_STRSZ:
        return strtab[1]
    if t == DT_NEEDED and needed_map:
        return needed_map.get(v, v)
    if t in _EVICT_TAG.values():
        return moved.get(v, v)
    return v


# --------------------------------------------------------------------------- room for a phdr

@dataclass(frozen=True, slots=True)
class Room:
    """Where the new PT_LOAD header goes: reuse header `index`, or grow the table in place
    (after moving `evict` out of the way)."""

    index: int | None
    evict: tuple[Shdr, ...] = ()


def _phdr_users(elf: RawElf, lo: int, hi: int, evict: tuple[Shdr, ...]) -> bool:
    """Does anything but the evicted sections (and segments that are just them) use [lo, hi)?"""
    gone = {(s.sh_offset, s.sh_size) for s in evict}
    users = [(s.sh_offset, s.file_end) for s in elf.shdrs if s.num and s.sh_size and
             s.sh_type != SHT_NOBITS and (s.sh_offset, s.sh_size) not in gone]
    users += [(ph.p_offset, ph.file_end) for ph in elf.phdrs
              if ph.p_type not in (PT_LOAD, PT_PHDR, PT_NULL) and ph.p_filesz and
              (ph.p_offset, ph.p_filesz) not in gone]
    users.append((elf.shoff, elf.shoff + elf.shnum * elf.shentsize))
    users.append((0, 64 if elf.bits == 64 else 52))
    return any(a < hi and lo < b for a, b in users)


_ADDR_TAGS = (3, 4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 36, DT_GNU_HASH, DT_VERSYM, DT_VERNEED,
              DT_VERDEF)  # PLTGOT HASH STRTAB SYMTAB RELA INIT FINI REL JMPREL *_ARRAY RELR ...


def _sections_match_segments(elf: RawElf) -> bool:
    """Does every allocated section sit where its address says (through PT_LOAD)?

    Growing the table trusts the section headers to say what follows it; a header that lies
    (hostile or damaged) would let the table overwrite live bytes.
    """
    for sec in elf.shdrs:
        if not sec.num or not sec.sh_flags & 2 or sec.sh_type == SHT_NOBITS or not sec.sh_size:
            continue
        try:
            if elf.vaddr_to_offset(sec.sh_addr, sec.sh_size) != sec.sh_offset:
                return False
        except ElfError:
            return False
    return True


def _tag_targets_in(elf: RawElf, lo: int, hi: int, moved: tuple[Shdr, ...]) -> bool:
    """Does a dynamic tag (other than those of moved sections) point into file bytes [lo, hi)?"""
    gone = {s.sh_addr for s in moved}
    for t, v in elf.entries:
        if t in _ADDR_TAGS and v not in gone:
            try:
                if lo <= elf.vaddr_to_offset(v) < hi:
                    return True
            except ElfError:
                continue
    return False


def _table_span(elf: RawElf) -> tuple[int, int] | None:
    """[end of the table, end + one entry), when the first PT_LOAD covers it."""
    lo = elf.phoff + elf.phnum * elf.phentsize
    hi = lo + elf.phentsize
    first = next((ph for ph in elf.phdrs if ph.p_type == PT_LOAD), None)
    if first is None or not (first.p_offset <= elf.phoff and hi <= first.file_end) or hi > elf.size:
        return None
    return lo, hi


def _padding_free(elf: RawElf) -> bool:
    """Can the table grow by one entry into zero padding inside the segment that maps it?"""
    span = _table_span(elf)
    if span is None or _phdr_users(elf, *span, ()) or _tag_targets_in(elf, *span, ()) or \
            not _sections_match_segments(elf):
        return False
    return elf.pread(span[1] - span[0], span[0]) == b"\0" * (span[1] - span[0])


def _reusable_note(elf: RawElf) -> int | None:
    """Index of a PT_NOTE header that may become the new PT_LOAD (docstring, c)."""
    props = {(ph.p_offset, ph.p_filesz) for ph in elf.phdrs if ph.p_type == PT_GNU_PROPERTY}
    ranked: list[tuple[int, int]] = []
    for i, ph in enumerate(elf.phdrs):
        if ph.p_type != PT_NOTE:
            continue
        build_id = has_build_id(elf, ph)
        rank = 0 if (ph.p_offset, ph.p_filesz) in props else 1 if not build_id else 2
        ranked.append((rank, i))
    return min(ranked)[1] if ranked else None


def _evictable(elf: RawElf, sec: Shdr) -> bool:
    """Can this section move to the new segment with everything that points at it following?"""
    if sec.sh_type in _EVICT_TAG:
        return elf.dyn_value(_EVICT_TAG[sec.sh_type]) == sec.sh_addr
    if sec is dynstr_section(elf):
        return True  # the append tier copies it anyway
    covering = [ph for ph in elf.phdrs if ph.p_type not in (PT_LOAD, PT_NULL, PT_PHDR) and
                ph.p_filesz and ph.p_offset < sec.file_end and sec.sh_offset < ph.file_end]
    exact = all(ph.p_offset == sec.sh_offset and ph.p_filesz == sec.sh_size for ph in covering)
    if sec.sh_type == SHT_NOTE:
        return exact
    return exact and any(ph.p_type == PT_INTERP for ph in covering)  # .interp


def _eviction(elf: RawElf) -> tuple[Shdr, ...] | None:
    """Sections to move so the table can grow by one entry in place (docstring, d)."""
    span = _table_span(elf)
    if span is None or not elf.shdrs or not _sections_match_segments(elf):
        return None
    lo, hi = span
    alloc = sorted((s for s in elf.shdrs if s.num and s.sh_size and s.sh_type != SHT_NOBITS
                    and s.sh_addr and s.sh_offset < hi and s.file_end > lo),
                   key=lambda s: s.sh_offset)
    if any(s.sh_offset < lo for s in alloc):
        return None  # a section straddles the end of the table
    evict = tuple(alloc)
    if not all(_evictable(elf, s) for s in evict) or \
            sum(s.sh_size for s in evict) > _MAX_EVICT_BYTES or _phdr_users(elf, lo, hi, evict) or \
            _tag_targets_in(elf, lo, hi, evict):
        return None
    return evict


def choose_room(elf: RawElf) -> Room | None:
    null = next((i for i, ph in enumerate(elf.phdrs) if ph.p_type == PT_NULL), None)
    if null is not None:
        return Room(null)
    if _padding_free(elf):
        return Room(None)
    note = _reusable_note(elf)
    if note is not None:
        return Room(note)
    evict = _eviction(elf)
    return Room(None, evict) if evict is not None else None


# --------------------------------------------------------------------------- append

@dataclass(slots=True)
class _Layout:
    """The new segment: its bytes, built front to back from file offset `start`."""

    start: int
    vaddr: int
    body: bytearray = field(default_factory=bytearray)

    def put(self, data: bytes, align: int = 1) -> tuple[int, int]:
        """Place `data`; returns its (file offset, address)."""
        pad = align_up(self.start + len(self.body), max(align, 1)) - self.start - len(self.body)
        self.body += b"\0" * pad
        off = self.start + len(self.body)
        self.body += data
        return off, self.vaddr + off - self.start


def plan_append(elf: RawElf, want: Want) -> Plan | None:
    """Tier 2: a new .dynstr (and whatever must move) in a new read-only PT_LOAD at the end."""
    loads = [ph for ph in elf.phdrs if ph.p_type == PT_LOAD]
    align = max(ph.p_align for ph in loads)
    if min(ph.p_align for ph in loads) < PAGE:
        # glibc refuses such files anyway; a new segment could not be placed congruently
        raise PatchError(f"{elf.path}: PT_LOAD alignment {min(ph.p_align for ph in loads):#x} "
                         "is below the page size; no segment can be appended")
    refs = symbol_name_refs(elf, dynstr_section(elf)) or []
    unterminated = elf.strsz > 0 and elf.pread(1, elf.strtab_off + elf.strsz - 1) != b"\0"
    if (refs and max(refs) >= elf.strsz) or unterminated:
        # the copy holds DT_STRSZ bytes: a symbol name beyond it would be lost
        raise PatchError(f"{elf.path}: a symbol name lies beyond DT_STRSZ ({elf.strsz:#x}); "
                         ".dynstr cannot be copied safely")
    room = choose_room(elf)
    if room is None:
        return None
    start = align_up(elf.size, 16)
    vaddr = align_up(max(ph.mem_end for ph in loads), align) + start % align
    lay = _Layout(start, vaddr)
    plan = Plan("append")
    phdrs = [Phdr(ph.p_type, ph.p_flags, ph.p_offset, ph.p_vaddr, ph.p_paddr, ph.p_filesz,
                  ph.p_memsz, ph.p_align) for ph in elf.phdrs]
    moved, moved_at = _move_sections(elf, room.evict, lay, phdrs, plan,
                                     skip_interp=want.interp is not None)
    new_str, offs = _new_strings(elf, want)
    if want.interp is not None:
        _move_interp(elf, want.interp, lay, phdrs, plan)
    str_off, str_vaddr = lay.put(new_str)
    if vaddr + len(lay.body) >= 1 << elf.bits:
        return None
    load = Phdr(PT_LOAD, PF_R, start, vaddr, vaddr, len(lay.body), len(lay.body), align)
    new_dyn = new_dynamic(elf, want, offs.get(b"path"), (str_vaddr, len(new_str)), moved,
                          [offs[b"add:" + n] for n in want.adds], _needed_map(elf, want, offs))
    if new_dyn is None:
        return None
    table = _new_table(elf, room, phdrs, load)
    plan.writes.insert(0, (elf.size, b"\0" * (start - elf.size) + bytes(lay.body)))
    plan.writes.append((elf.phoff, b"".join(elf.pack_phdr(ph) for ph in table)))
    plan.writes.append((elf.dyn_off, elf.pack_dyn(new_dyn)))
    plan.writes.append(_phnum_write(elf, len(table)))
    plan.writes.extend(_version_file_writes(elf, want, offs, room.evict, moved_at))
    sec = dynstr_section(elf)
    if sec is not None:  # keep section-based tools (strip, readelf -p) looking at the live copy
        plan.writes.append(_shdr_write(elf, sec, str_vaddr, str_off, len(new_str)))
        plan.writes.extend(_section_symbol_writes(elf, sec, str_vaddr))
    return plan


def _new_strings(elf: RawElf, want: Want) -> tuple[bytes, dict[bytes, int]]:
    """Old .dynstr + new names + spare NULs, and the offset of each new name."""
    out = bytearray(elf.dynstr())
    offs: dict[bytes, int] = {}

    def add(key: bytes, name: bytes) -> None:
        offs[key] = len(out)
        out.extend(name + b"\0")

    if want.runpath is not None:
        add(b"path", want.runpath)
    for old, new in want.renames:
        add(b"ren:" + old, new)
    for name in want.adds:
        add(b"add:" + name, name)
    out.extend(b"\0" * SPARE_BYTES)
    return bytes(out), offs


def _needed_map(elf: RawElf, want: Want, offs: dict[bytes, int]) -> dict[int, int]:
    """Old DT_NEEDED offset -> offset of the renamed copy."""
    out = {}
    for t, v in elf.entries:
        if t != DT_NEEDED:
            continue
        name = elf.dynstr_at(v)
        if b"ren:" + name in offs:
            out[v] = offs[b"ren:" + name]
    return out


def _version_file_writes(elf: RawElf, want: Want, offs: dict[bytes, int],
                         evict: tuple[Shdr, ...], moved_at: dict[int, int],
                         ) -> list[tuple[int, bytes]]:
    """A renamed library's version-need record must name it too (glibc asserts otherwise)."""
    if not want.renames:
        return []
    writes = []
    for ref in version_refs(elf):
        if not ref.is_file:
            continue
        key = b"ren:" + elf.dynstr_at(ref.value)
        if key in offs:
            writes.append((_moved_offset(ref.field_off, evict, moved_at),
                           struct.pack(elf.bo + "I", offs[key])))
    return writes


def _moved_offset(off: int, evict: tuple[Shdr, ...], moved_at: dict[int, int]) -> int:
    """Where a byte of an evicted section went (its bytes are copied before this write)."""
    for sec in evict:
        if sec.sh_offset <= off < sec.file_end and sec.num in moved_at:
            return moved_at[sec.num] + off - sec.sh_offset
    return off


def _move_sections(elf: RawElf, evict: tuple[Shdr, ...], lay: _Layout, phdrs: list[Phdr],
                   plan: Plan, *, skip_interp: bool) -> tuple[dict[int, int], dict[int, int]]:
    """Copy evicted sections into the new segment; point tags, headers, symbols at the copies.

    Returns {old address: new address} for the dynamic tags and {section index: new file
    offset}. The old bytes are zeroed: the
    grown table overwrites their start, and zero padding lets a later patch grow it again.
    """
    moved: dict[int, int] = {}
    moved_at: dict[int, int] = {}
    dynstr = dynstr_section(elf)
    for sec in evict:
        plan.writes.append((sec.sh_offset, b"\0" * sec.sh_size))
        interp = [ph for ph in phdrs if ph.p_type == PT_INTERP and ph.p_offset == sec.sh_offset]
        if sec is dynstr or (interp and skip_interp):
            continue  # replaced by the new copy anyway
        off, addr = lay.put(elf.pread(sec.sh_size, sec.sh_offset), min(sec.sh_addralign, 64))
        moved[sec.sh_addr] = addr
        moved_at[sec.num] = off
        for ph in phdrs:
            if ph.p_type != PT_LOAD and ph.p_offset == sec.sh_offset and ph.p_filesz:
                ph.p_offset, ph.p_vaddr, ph.p_paddr = off, addr, addr
        plan.writes.append(_shdr_write(elf, sec, addr, off, sec.sh_size))
        plan.writes.extend(_section_symbol_writes(elf, sec, addr))
    return moved, moved_at


def _move_interp(elf: RawElf, interp: bytes, lay: _Layout, phdrs: list[Phdr],
                 plan: Plan) -> None:
    """A longer interpreter goes into the new segment; PT_INTERP keeps its place in the table
    (before the PT_LOADs) and .interp's section header follows."""
    ph = next(ph for ph in phdrs if ph.p_type == PT_INTERP)
    old = next(p for p in elf.phdrs if p.p_type == PT_INTERP)
    if len(interp) + 1 <= old.p_filesz and ph.p_offset == old.p_offset:
        plan.writes.append((old.p_offset, interp.ljust(old.p_filesz, b"\0")))
        return
    off, addr = lay.put(interp + b"\0")
    sec = next((s for s in elf.shdrs if s.sh_offset == old.p_offset and s.sh_size ==
                old.p_filesz and s.num), None)
    ph.p_offset, ph.p_vaddr, ph.p_paddr = off, addr, addr
    ph.p_filesz = ph.p_memsz = len(interp) + 1
    if sec is not None:
        plan.writes.append(_shdr_write(elf, sec, addr, off, len(interp) + 1))
        plan.writes.extend(_section_symbol_writes(elf, sec, addr))


def _new_table(elf: RawElf, room: Room, phdrs: list[Phdr], load: Phdr) -> list[Phdr]:
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


def _phnum_write(elf: RawElf, phnum: int) -> tuple[int, bytes]:
    return (56 if elf.bits == 64 else 44, struct.pack(elf.bo + "H", phnum))


def _shdr_write(elf: RawElf, sec: Shdr, addr: int, offset: int, size: int) -> tuple[int, bytes]:
    """Rewrite sh_addr, sh_offset, sh_size of one section header (they are contiguous)."""
    word = "I" if elf.bits == 32 else "Q"
    pos = elf.shoff + sec.num * elf.shentsize + (12 if elf.bits == 32 else 16)
    return (pos, struct.pack(elf.bo + word * 3, addr, offset, size))


def _section_symbol_writes(elf: RawElf, sec: Shdr, addr: int) -> list[tuple[int, bytes]]:
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
