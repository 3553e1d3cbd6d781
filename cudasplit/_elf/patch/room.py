"""Where the appended segment's program header goes: the strip-safe PT_LOAD placement.

In order of preference:

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

from dataclasses import dataclass

from cudasplit._elf.patch.want import EVICT_TAG
from cudasplit._elf.read import (
    ADDRESS_TAGS,
    PT_GNU_PROPERTY,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_NULL,
    PT_PHDR,
    SHT_NOBITS,
    SHT_NOTE,
    RawElf,
    Shdr,
    dynstr_section,
    has_build_id,
)
from cudasplit.errors import ElfError

_MAX_EVICT_BYTES = 8 << 20  # sections moved to make room for one program header, at most


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
        if t in ADDRESS_TAGS and v not in gone:
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
    if sec.sh_type in EVICT_TAG:
        return elf.dyn_value(EVICT_TAG[sec.sh_type]) == sec.sh_addr
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
    """The first room in the module docstring's order (a-d); None when there is none."""
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
