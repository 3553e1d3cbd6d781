"""Hostile ELF files and ``ar`` archives, written byte by byte: the shapes of the bad-input rounds.

Each builder returns bytes that compress to almost nothing (the hostile part is repetition,
overlap or length) and that a reader of the old kind turned into minutes or gigabytes:

* :func:`symbol_product` — N dynamic symbols whose names all point into one S-byte string;
* :func:`overlapping_fatbins` — K ``.nv_fatbin`` section headers over the same region;
* :func:`long_name_archive` — N members named ``/0`` into a long-name table without an end;
* :func:`glibc_digits` — a version need ``GLIBC_`` followed by thousands of digits;
* :func:`damaged_archive` — an archive of N objects whose ELF headers are all damaged;
* :func:`loader_strings` — a loadable file whose interpreter, dynamic array and dynamic
  strings are long, unterminated or shared by every entry;
* :func:`notes`, :func:`version_chain` — loadable files with many notes, or a long (or
  cyclic) version need chain (:func:`loadable` writes them).

:func:`elf_file` is the general writer behind them: an ELF64 little-endian x86-64 file with the
given sections (a section may reuse another's bytes: ``same_as``) and, optionally, program
headers over the whole file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.fatbins import Entry, container

SHT_PROGBITS, SHT_STRTAB, SHT_DYNSYM, SHT_VERNEED, SHT_VERSYM = 1, 3, 11, 0x6FFFFFFE, 0x6FFFFFFF
ET_REL, ET_DYN = 1, 3


@dataclass(frozen=True)
class Sec:
    """One section: its bytes, or ``same_as`` another section's (the same offset and size)."""

    name: str
    data: bytes = b""
    type: int = SHT_PROGBITS
    link: str | None = None
    info: int = 0
    entsize: int = 0
    same_as: str | None = None


def elf_file(sections: list[Sec], *, e_type: int = ET_REL, loadable: bool = False) -> bytes:
    """The file: header, program headers when ``loadable`` (one PT_LOAD over the whole file at
    address 0), each distinct section's bytes (8-aligned), ``.shstrtab``, section headers."""
    names = b"\0" + b"".join(s.name.encode() + b"\0" for s in sections) + b".shstrtab\0"
    phnum = 1 if loadable else 0
    body, offset = bytearray(), 64 + 56 * phnum
    placed: dict[str, tuple[int, int]] = {}
    for sec in [*sections, Sec(".shstrtab", names, SHT_STRTAB)]:
        if sec.same_as is not None:
            continue
        pad = -offset % 8
        body += b"\0" * pad
        offset += pad
        placed.setdefault(sec.name, (offset, len(sec.data)))
        body += sec.data
        offset += len(sec.data)
    body += b"\0" * (-offset % 8)
    shoff = 64 + 56 * phnum + len(body)
    index = {s.name: i + 1 for i, s in reversed(list(enumerate(sections)))}
    shdrs = [b"\0" * 64]
    name_at = 1
    for sec in [*sections, Sec(".shstrtab", names, SHT_STRTAB)]:
        off, size = placed[sec.same_as or sec.name]
        link = index.get(sec.link, 0) if sec.link else 0
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_at, sec.type, 2, off, off, size, link,
                                 sec.info, 8, sec.entsize))
        name_at += len(sec.name) + 1
    end = shoff + 64 * len(shdrs)
    phdrs = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, end, end, 0x1000) if loadable else b""
    header = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                         e_type, 62, 1, 0, 64 if loadable else 0, shoff, 0, 64, 56, phnum, 64,
                         len(shdrs), len(shdrs) - 1)
    return header + phdrs + bytes(body) + b"".join(shdrs)


def _sym(name: int, shndx: int, info: int = 0x12) -> bytes:
    return struct.pack("<IBBHQQ", name, info, 0, shndx, 0, 0)


def _verneed(library: int, versions: list[int]) -> bytes:
    """One need of ``library`` with an aux record per version name (indexes 2, 3, ...)."""
    need = struct.pack("<HHIII", 1, len(versions), library, 16, 0)
    return need + b"".join(struct.pack("<IHHII", 0, 0, 2 + i, name,
                                       16 if i + 1 < len(versions) else 0)
                           for i, name in enumerate(versions))


def symbol_table(names: list[int], strings: bytes, version: bytes, *, defined: bool,
                 versions: int = 2, also: bytes = b"") -> list[Sec]:
    """``.dynsym`` with a symbol per name offset, its ``.dynstr`` (``strings``, then
    ``libc.so.6``, ``version`` and ``also``), ``.gnu.version`` (every symbol bound to version
    index ``versions``) and ``.gnu.version_r`` (``version`` index 2, ``also`` index 3)."""
    libc = len(strings)
    table = strings + b"libc.so.6\0" + version + b"\0" + (also + b"\0" if also else b"")
    wanted = [libc + 10] + ([libc + 10 + len(version) + 1] if also else [])
    symbols = _sym(0, 0, 0) + b"".join(_sym(n, 1 if defined else 0) for n in names)
    return [Sec(".dynstr", table, SHT_STRTAB),
            Sec(".dynsym", symbols, SHT_DYNSYM, link=".dynstr", info=1, entsize=24),
            Sec(".gnu.version", struct.pack(f"<{len(names) + 1}H", 0, *[versions] * len(names)),
                SHT_VERSYM, link=".dynsym", entsize=2),
            Sec(".gnu.version_r", _verneed(libc, wanted), SHT_VERNEED, link=".dynstr",
                info=1)]


def symbol_product(count: int = 8000, length: int = 1 << 20, *, defined: bool = True) -> bytes:
    """``count`` symbols all named by one ``length``-byte string (issue: 8 GB of names)."""
    strings = b"\0" + b"A" * length + b"\0"
    return elf_file(symbol_table([1] * count, strings, b"GLIBC_2.2.5", defined=defined),
                    e_type=ET_DYN)


def symbol_suffixes(count: int = 8000, length: int = 1 << 20) -> bytes:
    """``count`` symbols named by the suffixes of one string (each a different offset)."""
    strings = b"\0" + b"A" * length + b"\0"
    return elf_file(symbol_table(list(range(1, count + 1)), strings, b"GLIBC_2.2.5",
                                 defined=True), e_type=ET_DYN)


def glibc_digits(digits: int = 5000) -> bytes:
    """Version needs ``GLIBC_2.17`` and ``GLIBC_<digits>``, bound to an undefined symbol."""
    strings = b"\0memcpy\0"
    return elf_file(symbol_table([1], strings, b"GLIBC_2.17", defined=False,
                                 also=b"GLIBC_" + b"9" * digits), e_type=ET_DYN)


def overlapping_fatbins(headers: int = 300, entries: int = 65536) -> bytes:
    """``headers`` ``.nv_fatbin`` section headers over one fatbinary of ``entries`` entries
    (64 bytes each, no payload)."""
    fatbin = container(*[Entry("sass", 80 + i % 20, payload=b"") for i in range(entries)])
    sections = [Sec(".text", b"\xc3"), Sec(".nv_fatbin", fatbin)]
    sections += [Sec(".nv_fatbin", same_as=".nv_fatbin") for _ in range(headers - 1)]
    return elf_file(sections)


def _ar_header(name: bytes, size: int) -> bytes:
    return (name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
            + str(size).encode().ljust(10) + b"`\n")


def long_name_archive(members: int = 1000, table: int = 15 << 20) -> bytes:
    """``members`` empty members named ``/0`` into a ``table``-byte long-name table that
    holds no name end (``/\\n``)."""
    out = bytearray(b"!<arch>\n" + _ar_header(b"//", table) + b"a" * table
                    + b"\n" * (table & 1))
    for _ in range(members):
        out += _ar_header(b"/0", 0)
    return bytes(out)


def damaged_archive(members: int = 20000) -> bytes:
    """``members`` objects, each an ELF magic and a damaged header (distinct names)."""
    out = bytearray(b"!<arch>\n")
    for i in range(members):
        data = b"\x7fELF\x09\x09" + b"\0" * 2
        out += _ar_header(f"o{i}.o/".encode(), len(data)) + data
    return bytes(out)


def _phdr(p_type: int, offset: int, size: int) -> bytes:
    return struct.pack("<IIQQQQQQ", p_type, 4, offset, offset, offset, size, size, 8)


def loader_strings(*, interp: int = 0, dynamic: int = 0, needed: int = 0,
                   string: int = 1 << 20) -> bytes:
    """A loadable ELF64 whose PT_INTERP is ``interp`` bytes without a NUL, whose dynamic array
    holds ``dynamic`` entries before any DT_NULL (none when ``dynamic`` is its whole size),
    and ``needed`` DT_NEEDED entries all naming offset 1 of a ``string``-byte name."""
    strings = b"\0" + b"n" * string + b"\0"
    entries = [(1, 1)] * needed + [(5, 0), (10, len(strings))]
    phnum = 3 if interp else 2
    first = 64 + 56 * phnum
    dyn_at = first
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in entries)
    if dynamic:
        dyn += struct.pack("<qQ", 0x6FFFFFF0 + 0x100, 0) * dynamic   # unknown tags, no NULL
    else:
        dyn += struct.pack("<qQ", 0, 0)
    str_at = dyn_at + len(dyn)
    # DT_STRTAB's value is an address; the one PT_LOAD maps the file at address 0.
    entries[len(entries) - 2] = (5, str_at)
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in entries) + dyn[16 * len(entries):]
    interp_at = str_at + len(strings)
    body = dyn + strings + b"/" * interp
    end = first + len(body)
    phdrs = _phdr(1, 0, end) + _phdr(2, dyn_at, len(dyn))
    if interp:
        phdrs += _phdr(3, interp_at, interp)
    header = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                         ET_DYN, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    return header + phdrs + body


def loadable(parts: dict[str, bytes], dynamic: Callable[[dict[str, int]], list[tuple[int, int]]],
             *, dynamic_slots: int = 64, note: str | None = None) -> bytes:
    """A loadable ELF64 (one PT_LOAD mapping the file at address 0, so an address is its file
    offset): a dynamic array of ``dynamic_slots`` entries (``dynamic(offsets)`` fills them,
    the rest DT_NULL), then ``parts`` (8-aligned; ``offsets`` maps each name to where it
    lies); ``note`` names the part a PT_NOTE covers."""
    phnum = 3 if note else 2
    first = 64 + 56 * phnum
    dyn_size = 16 * dynamic_slots
    offsets: dict[str, int] = {}
    body = bytearray()
    at = first + dyn_size
    for name, data in parts.items():
        pad = -at % 8
        body += b"\0" * pad
        at += pad
        offsets[name] = at
        body += data
        at += len(data)
    entries = dynamic(offsets)[:dynamic_slots - 1]
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in entries)
    dyn += b"\0" * (dyn_size - len(dyn))
    end = first + dyn_size + len(body)
    phdrs = _phdr(1, 0, end) + _phdr(2, first, dyn_size)
    if note:
        phdrs += _phdr(4, offsets[note], len(parts[note]))
    header = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                         ET_DYN, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    return header + phdrs + dyn + bytes(body)


def notes(count: int, *, namesz: int = 0, descsz: int = 0) -> bytes:
    """A loadable file whose PT_NOTE holds ``count`` notes that are not a build-id, each
    claiming ``namesz`` and ``descsz`` (they may claim more than there is)."""
    one = struct.pack("<III", namesz, descsz, 1) + b"\0" * 4
    strings = b"\0libc.so.6\0"
    return loadable({"strings": strings, "notes": one * count},
                    lambda at: [(5, at["strings"]), (10, len(strings))], note="notes")


def version_chain(records: int, *, aux: int = 1, back: bool = False) -> bytes:
    """A loadable file whose DT_VERNEED chain holds ``records`` records of ``aux`` aux records
    each (the count says so), all naming one library; ``back``: the last record's next
    offset wraps to the first (a cycle, in 32 bits)."""
    strings = b"\0libc.so.6\0GLIBC_2.17\0"
    chain = bytearray()
    size = 16 + 16 * aux
    for i in range(records):
        last = i == records - 1
        nxt = ((-(size * i)) % (1 << 32)) if (last and back) else (0 if last else size)
        chain += struct.pack("<HHIII", 1, aux, 1, 16, nxt)
        for j in range(aux):
            chain += struct.pack("<IHHII", 0, 0, 2 + j, 11, 0 if j == aux - 1 else 16)
    return loadable({"strings": strings, "chain": bytes(chain)},
                    lambda at: [(5, at["strings"]), (10, len(strings)),
                                (0x6FFFFFFE, at["chain"]), (0x6FFFFFFF, records)])
