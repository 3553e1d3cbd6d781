"""Tier 2: plan an edit as a new PT_LOAD at the end of the file (read-only, unless it holds
the moved dynamic array).

The segment holds a copy of ``.dynstr`` with the new strings and ``SPARE_BYTES`` NULs (so that a
later rewrite goes in place), a longer interpreter, and whatever sections had to move to make
room for its program header (``room``), and the dynamic array when it has no
spare ``DT_NULL`` for a new tag (lld and mold leave none); every tag and header that points at
moved bytes follows them: the new program header table, ``e_phnum``, a moved section's header
and its ``STT_SECTION`` symbol in ``.symtab`` (section-based tools, ``strip`` and ``readelf``,
must see the live copies).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cudasplit._elf.patch.room import Room, choose_room
from cudasplit._elf.patch.want import Plan, Want, new_dynamic
from cudasplit._elf.read import (
    DT_NEEDED,
    PAGE,
    PF_R,
    PF_W,
    PT_DYNAMIC,
    PT_INTERP,
    PT_LOAD,
    PT_NULL,
    PT_PHDR,
    SHT_DYNAMIC,
    SHT_SYMTAB,
    Phdr,
    RawElf,
    Shdr,
    align_up,
    dynstr_section,
    symbol_name_refs,
    version_refs,
)
from cudasplit.errors import PatchError

SPARE_BYTES = 256  # NULs kept after an appended string so that later rewrites fit in place
SPARE_DYN = 8  # DT_NULLs kept after a moved dynamic array so that later edits fit in place


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
    _refuse_unappendable(elf, loads)
    room = choose_room(elf)
    if room is None:
        return None
    start = align_up(max(elf.size, _claimed_table_end(elf)), 16)
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
    dyn_args = (elf, want, offs.get(b"path"), (str_vaddr, len(new_str)), moved,
                [offs[b"add:" + n] for n in want.adds], _needed_map(elf, want, offs))
    new_dyn = new_dynamic(*dyn_args)
    dyn_moved = new_dyn is None  # no spare DT_NULL (lld, mold): the dynamic array moves too
    if new_dyn is None:
        new_dyn = new_dynamic(*dyn_args, cap=len(elf.entries) + 2 + SPARE_DYN)
        assert new_dyn is not None
        _move_dynamic(elf, elf.pack_dyn(new_dyn), lay, phdrs, plan)
    # ld.so writes DT_DEBUG's value into an executable's dynamic array: a moved one needs RW
    flags = PF_R | PF_W if dyn_moved else PF_R
    if vaddr + len(lay.body) >= 1 << elf.bits:
        return None
    load = Phdr(PT_LOAD, flags, start, vaddr, vaddr, len(lay.body), len(lay.body), align)
    table = new_table(elf, room, phdrs, load)
    plan.writes.insert(0, (elf.size, b"\0" * (start - elf.size) + bytes(lay.body)))
    plan.writes.append((elf.phoff, b"".join(elf.pack_phdr(ph) for ph in table)))
    if not dyn_moved:
        plan.writes.append((elf.dyn_off, elf.pack_dyn(new_dyn)))
    plan.writes.append(phnum_write(elf, len(table)))
    plan.writes.extend(_forget_straddling_table(elf))
    plan.writes.extend(_version_file_writes(elf, want, offs, room.evict, moved_at))
    sec = dynstr_section(elf)
    if sec is not None:  # keep section-based tools (strip, readelf -p) looking at the live copy
        plan.writes.append(shdr_write(elf, sec, str_vaddr, str_off, len(new_str)))
        plan.writes.extend(section_symbol_writes(elf, sec, str_vaddr))
    return plan


# How far past the end of the file a bogus section header table may reach and still be
# stepped over (zeros up to its end); one reaching further is left past the new end too.
_MAX_TABLE_GAP = 16 << 20


def _claimed_table_end(elf: RawElf) -> int:
    """Where the section header table ``e_shoff`` names ends, when it lies past the end of
    the file (0 otherwise). Such a table is no valid one (nothing of it was read), and the
    new segment must not become its contents: appended at the old end, its bytes were read
    as section headers (``readelf -a`` warned 2 -> 67 times for libcudart with e_shoff at
    the end of the file). So the segment starts after the claimed table (zeros in between),
    or, when that is absurdly far, the table stays past the new end of the file anyway."""
    end = elf.shoff + elf.shnum * elf.shentsize
    if (not elf.shnum or end <= elf.size or elf.shoff < elf.size
            or elf.shoff >= elf.size + _MAX_TABLE_GAP):
        return 0
    return end


def _forget_straddling_table(elf: RawElf) -> list[tuple[int, bytes]]:
    """A table that starts inside the file and runs past its end (nothing of it was read)
    would turn into readable garbage once the file grows: its first entries are bytes of the
    file, the rest the new segment (``readelf -a``: 2 -> 14 warnings for libcudart with
    e_shoff one entry on). Its section headers are left alone; the ELF header stops naming
    them (``e_shoff``, ``e_shnum``, ``e_shstrndx`` = 0: "no section headers", which the
    loader never reads anyway)."""
    end = elf.shoff + elf.shnum * elf.shentsize
    if not elf.shnum or not elf.shoff < elf.size < end:
        return []
    word = "Q" if elf.bits == 64 else "I"
    shoff_at, shnum_at = (40, 60) if elf.bits == 64 else (32, 48)
    return [(shoff_at, struct.pack(elf.bo + word, 0)),
            (shnum_at, struct.pack(elf.bo + "HH", 0, 0))]


def _refuse_unappendable(elf: RawElf, loads: list[Phdr]) -> None:
    """PatchError (file untouched) when no segment can be appended or .dynstr not be copied."""
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
        plan.writes.append(shdr_write(elf, sec, addr, off, sec.sh_size))
        plan.writes.extend(section_symbol_writes(elf, sec, addr))
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
        plan.writes.append(shdr_write(elf, sec, addr, off, len(interp) + 1))
        plan.writes.extend(section_symbol_writes(elf, sec, addr))


def _move_dynamic(elf: RawElf, data: bytes, lay: _Layout, phdrs: list[Phdr], plan: Plan) -> None:
    """A dynamic array that cannot grow in place goes into the new segment (as patchelf does):
    PT_DYNAMIC and the ``.dynamic`` section header follow; the old array stays, unread, in
    its place (``l_ld`` comes from PT_DYNAMIC, so the copy is the one the loader uses)."""
    off, addr = lay.put(data, 16)
    for ph in phdrs:
        if ph.p_type == PT_DYNAMIC:
            ph.p_offset, ph.p_vaddr, ph.p_paddr = off, addr, addr
            ph.p_filesz = ph.p_memsz = len(data)
    sec = next((s for s in elf.shdrs if s.num and s.sh_type == SHT_DYNAMIC and
                s.sh_offset == elf.dyn_off), None)
    if sec is not None:
        plan.writes.append(shdr_write(elf, sec, addr, off, len(data)))
        plan.writes.extend(section_symbol_writes(elf, sec, addr))


# --------------------------------------------------------------------------- headers
# Writes that keep the headers true when the segment moves bytes.

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
