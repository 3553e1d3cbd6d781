"""Read the dynamic array and its string table, refusing what the writer could not edit safely.

Strict reading (the writer) also checks that every address tag and both hash tables lie inside
the segments that map them; :func:`dyn_names` reads every name a loader looks up. At most
:data:`MAX_DYNAMIC` entries are read (real arrays hold about forty): a segment claiming more and
holding no ``DT_NULL`` in them is refused instead of read whole.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cudasplit._elf.read.const import (
    ADDRESS_TAGS,
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    DT_STRSZ,
    DT_STRTAB,
    DYN_FORMAT,
    PT_DYNAMIC,
    PT_LOAD,
    STRING_TAGS,
)
from cudasplit._elf.read.raw import RawElf
from cudasplit._elf.read.walk import version_refs
from cudasplit.errors import ElfError

MAX_DYNAMIC = 1 << 16       # dynamic entries read before DT_NULL


def read_dynamic(elf: RawElf, strict: bool = True) -> None:
    """Fill ``dyn``/``strtab_*``/``strsz``; refuse what the writer could not edit safely
    (``strict``; the facts reader only needs what the loader reads)."""
    dyn = [ph for ph in elf.phdrs if ph.p_type == PT_DYNAMIC]
    if not dyn:
        elf.dyn = None
        return
    ph = dyn[0]
    elf.dyn_off, elf.dyn_cap = ph.p_offset, ph.p_filesz // elf.dynent
    if elf.dyn_off + elf.dyn_cap * elf.dynent > elf.size:
        raise elf.fail(f"dynamic segment at {elf.dyn_off:#x} lies past the end of the file")
    raw = elf.pread(min(elf.dyn_cap, MAX_DYNAMIC) * elf.dynent, elf.dyn_off)
    entries: list[tuple[int, int]] = []
    for tag, val in struct.iter_unpack(elf.bo + DYN_FORMAT[elf.bits], raw):
        if tag == DT_NULL:
            break
        entries.append((tag, val))
    else:
        if elf.dyn_cap > MAX_DYNAMIC:
            raise elf.fail(f"dynamic array has no DT_NULL in its first {MAX_DYNAMIC} entries")
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


def collect(elf: RawElf, value: int, spent: list[int]) -> bytes:
    """The dynamic string at ``value``, counted in ``spent``: one reader's names together
    stay within :meth:`RawElf.names_budget` (65,536 entries naming one long string would
    otherwise hand on gigabytes of the same name)."""
    name = elf.dynstr_at(value)
    spent[0] += len(name)
    if spent[0] > elf.names_budget():
        raise elf.fail("dynamic strings repeat past twice DT_STRSZ")
    return name


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
    spent = [0]
    for t, v in elf.entries:
        if t in STRING_TAGS:
            name = collect(elf, v, spent)
            by_tag.setdefault(t, []).append(name)
            if t not in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
                others.append((t, name))
    versions = tuple((r.is_file, collect(elf, r.value, spent)) for r in version_refs(elf))
    return DynNames(tuple(by_tag.get(DT_NEEDED, [])), tuple(by_tag.get(DT_SONAME, [])),
                    tuple(by_tag.get(DT_RUNPATH, [])), tuple(by_tag.get(DT_RPATH, [])),
                    tuple(others), versions)

