"""Symbol versions of an ELF file: the versions it needs (its glibc floor), the symbols it exports.

Read from the sections ``readelf -V`` and ``objdump -T`` read: ``.gnu.version_r`` (version
needs: ``GLIBC_2.27`` from ``libc.so.6``), ``.gnu.version_d`` (the versions the file defines),
``.gnu.version`` (one version index per dynamic symbol) and ``.dynsym``. The floor of a prefix
(``GLIBC``, ``GLIBCXX``, ``CXXABI``, ``GCC``) is the highest numbered version of it the file
needs; it is named with the first symbol bound to that version (what conda-forge's
``check-glibc`` and a person with ``nm`` look for).

Every table is read once, whole, when it is at most :data:`MAX_TABLE` bytes (else a problem);
the record chains are walked inside those bytes with at most one step per record the table can
hold (every next-offset moves forward). Symbols are read one at a time and never kept as a list:
the glibc floor keeps the first symbol of each needed version, the exports keep at most
:data:`MAX_EXPORTS` names. A name is decoded once per offset, at most :data:`MAX_NAME` bytes of
it, and all names of a file together at most twice the string table (:class:`_Names`): 8,000
symbols naming one 1 MB string used to become 8,000 strings of 1 MB. A version is numbers of at
most 9 digits, at most 8 of them (``GLIBC_`` and 5,000 digits was a traceback). Damage is a
problem string, never an exception.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from cudasplit._elf.read.bounds import Stop, checkpoint
from cudasplit._elf.read.const import SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM
from cudasplit._elf.read.sections import Region, Section, SectionTable

__all__ = ["FLOOR_PREFIXES", "MAX_EXPORTS", "MAX_NAME", "MAX_TABLE", "ExportedSymbol",
           "VersionNeed", "exported_symbols", "version_floors", "version_key", "version_needs"]

# 16 MiB: bigger symbol, version or string tables are not read (NVIDIA's largest .dynstr,
# libcudnn_graph's, is 200 KB; its .dynsym 68 KB).
MAX_TABLE = 1 << 24
MAX_NAME = 1 << 14           # bytes of one symbol or version name; a longer one is not read
MAX_EXPORTS = 1 << 16        # exported symbols listed per file (NVIDIA's most: about 3,000)
FLOOR_PREFIXES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
# A version is at most 8 numbers of at most 9 ASCII digits: int() of anything longer is slow
# (and raises past 4,300 digits), and no glibc, libstdc++ or libgcc version comes near it.
_NUMBERED = re.compile(r"^(GLIBCXX|GLIBC|CXXABI|GCC)_([0-9]{1,9}(?:\.[0-9]{1,9}){0,7})$")
_PREFIXED = re.compile(r"^(GLIBCXX|GLIBC|CXXABI|GCC)_")
_SYM = {64: "IBBHQQ", 32: "IIIBBH"}
_SHN_ABS = 0xFFF1
_BINDS = (1, 2, 10)           # GLOBAL, WEAK, GNU_UNIQUE
_TYPES = {0: "notype", 1: "object", 2: "func", 6: "tls", 10: "ifunc", 5: "common"}


@dataclass(frozen=True, slots=True, order=True)
class VersionNeed:
    """One version a file needs: ``GLIBC_2.27`` of ``libc.so.6``, and a symbol bound to it.

    Attributes:
        prefix: ``GLIBC``, ``GLIBCXX``, ``CXXABI`` or ``GCC``.
        version: the number (``2.27``).
        library: the library the version is needed from.
        symbol: the first dynamic symbol bound to this version (None: none is).

    Raises:
        Nothing: a value.
    """

    prefix: str
    version: str
    library: str
    symbol: str | None = None

    @property
    def name(self) -> str:
        return f"{self.prefix}_{self.version}"


@dataclass(frozen=True, slots=True, order=True)
class ExportedSymbol:
    """One dynamic symbol a library defines for others.

    Attributes:
        name: the symbol name.
        version: its version node (``libcudart.so.12``), None when unversioned.
        default: ``name@@version`` (what new links bind to) rather than ``name@version``.
        kind: ``func``, ``object``, ``tls``, ``ifunc``, ``common`` or ``notype``.

    Raises:
        Nothing: a value.
    """

    name: str
    version: str | None
    default: bool
    kind: str


def version_key(version: str) -> tuple[int, ...]:
    """``2.27`` -> ``(2, 27)``: versions compare as numbers, not text. Only the short ASCII
    numbers this module reads (and ``--max-glibc``) are versions: anything else raises
    ``ValueError``."""
    parts = version.split(".")
    if len(parts) > 8 or not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts):
        raise ValueError(f"not a version: {version[:40]!r}")
    return tuple(int(part) for part in parts)


class _Names:
    """Names in one string table, decoded once per offset (:data:`MAX_NAME` bytes at most),
    all of them together at most twice the table plus 1 MiB: names that overlap (every
    symbol naming the same long string, or each a suffix of the next) cannot multiply it."""

    def __init__(self, table: bytes, where: str, problems: list[str]) -> None:
        self.table, self.where, self.problems = table, where, problems
        self.cache: dict[int, str] = {}
        self.budget = 2 * len(table) + (1 << 20)
        self.spent = False       # the budget ran out: every later name is None

    def at(self, offset: int) -> str | None:
        """The name at ``offset``; ``None`` when it cannot be read (said once per file)."""
        found = self.cache.get(offset)
        if found is not None:
            return found
        table = self.table
        if self.spent:
            return None
        if offset >= len(table):
            return ""
        end = table.find(b"\0", offset, offset + MAX_NAME + 1)
        if end < 0:
            self.problems.append(f"{self.where}: a name longer than {MAX_NAME} bytes or "
                                 "without its end")
            return None
        if end - offset > self.budget:
            self.spent = True
            self.problems.append(f"{self.where}: names overlap past twice the string table; "
                                 "the rest are not read")
            return None
        self.budget -= end - offset
        if len(self.cache) < MAX_EXPORTS * 2:
            self.cache[offset] = name = table[offset:end].decode("utf-8", "surrogateescape")
            return name
        return table[offset:end].decode("utf-8", "surrogateescape")


class _Tables:
    """The symbol and version tables of one region, each read once."""

    def __init__(self, region: Region, table: SectionTable, problems: list[str],
                 stop: Stop | None = None) -> None:
        self.region, self.table, self.problems, self.stop = region, table, problems, stop
        self.fmt = _SYM.get(table.bits)
        self.bo = table.bo
        self.steps = 0

    def complain(self, text: str) -> None:
        self.problems.append(text)

    def step(self) -> None:
        self.steps += 1
        checkpoint(self.stop, self.steps)

    def read(self, section: Section | None) -> bytes:
        if section is None:
            return b""
        if section.size > MAX_TABLE:
            self.problems.append(f"{section.name}: {section.size} bytes, more than the "
                                 f"{MAX_TABLE} this reader reads")
            return b""
        data = self.region.pread(section.size, section.offset)
        if len(data) != section.size:
            self.problems.append(f"{section.name} runs past the end of the file")
        return data

    def first(self, sh_type: int) -> Section | None:
        return self.table.first(sh_type)

    def names(self, section: Section | None) -> _Names:
        """The string table ``section`` links to."""
        linked = self.table.at(section.link) if section is not None else None
        where = linked.name or "string table" if linked is not None else "string table"
        return _Names(self.read(linked), where, self.problems)


def _needs(t: _Tables) -> dict[int, tuple[str, str]]:
    """Version index -> (library, version name) from ``.gnu.version_r``. Records and their
    aux records together take at most one step per 16 bytes of the table (every next-offset
    is unsigned: the walk only moves forward)."""
    section = t.first(SHT_GNU_VERNEED)
    data, names = t.read(section), t.names(section)
    found: dict[int, tuple[str, str]] = {}
    steps = [len(data) // 16]
    off = 0
    while data and off + 16 <= len(data) and steps[0] > 0:
        steps[0] -= 1
        t.step()
        _ver, count, file, aux, nxt = struct.unpack_from(t.bo + "HHIII", data, off)
        _need_aux(t, data, names, off + aux, count, names.at(file) or "", found, steps)
        if not nxt:
            return found
        off += nxt
    if data:
        t.complain(".gnu.version_r: the version need chain is damaged")
    return found


def _need_aux(t: _Tables, data: bytes, names: _Names, off: int, count: int, library: str,
              found: dict[int, tuple[str, str]], steps: list[int]) -> None:
    while count and off + 16 <= len(data) and steps[0] > 0:
        steps[0] -= 1
        t.step()
        _hash, _flags, index, name, nxt = struct.unpack_from(t.bo + "IHHII", data, off)
        version = names.at(name)
        if version is not None:
            found[index & 0x7FFF] = (library, version)
        count -= 1
        if not nxt:
            return
        off += nxt


def _definitions(t: _Tables) -> dict[int, str]:
    """Version index -> version name from ``.gnu.version_d`` (the base entry included); at
    most one step per 20 bytes of the table."""
    section = t.first(SHT_GNU_VERDEF)
    data, names = t.read(section), t.names(section)
    found: dict[int, str] = {}
    off, steps = 0, len(data) // 20
    while data and off + 20 <= len(data) and steps > 0:
        steps -= 1
        t.step()
        _ver, _flags, index, _count, _hash, aux, nxt = struct.unpack_from(t.bo + "HHHHIII", data,
                                                                        off)
        if off + aux + 8 <= len(data):
            name = names.at(struct.unpack_from(t.bo + "I", data, off + aux)[0])
            if name is not None:
                found[index & 0x7FFF] = name
        if not nxt:
            return found
        off += nxt
    if data:
        t.complain(".gnu.version_d: the version definition chain is damaged")
    return found


class _Symbols:
    """The dynamic symbol table, read once: each symbol's fields as it is reached, and its
    version index; names only when asked (:meth:`name`)."""

    def __init__(self, t: _Tables) -> None:
        self.t = t
        dynsym = t.first(SHT_DYNSYM)
        self.data = t.read(dynsym) if dynsym is not None and t.fmt is not None else b""
        self.names = t.names(dynsym) if self.data else _Names(b"", "", t.problems)
        self.fmt = struct.Struct(t.bo + (t.fmt or "IBBHQQ"))
        raw = t.read(t.first(SHT_GNU_VERSYM)) if self.data else b""
        self.versions = memoryview(raw[:len(raw) // 2 * 2]).cast("H") if raw else None
        self.swap = (t.bo == "<") != (struct.pack("=H", 1) == b"\1\0")

    def __iter__(self) -> Iterator[tuple[int, int, int, int, int, int]]:
        """(index, st_name, info, other, shndx, version index) of each symbol."""
        sixty_four = self.t.table.bits == 64
        versions = self.versions
        for i, fields in enumerate(self.fmt.iter_unpack(self.data[:len(self.data) //
                                                                  self.fmt.size * self.fmt.size])):
            self.t.step()
            if sixty_four:
                name, info, other, shndx = fields[0], fields[1], fields[2], fields[3]
            else:
                name, info, other, shndx = fields[0], fields[3], fields[4], fields[5]
            version = 1
            if versions is not None and i < len(versions):
                version = versions[i]
                if self.swap:
                    version = ((version & 0xFF) << 8) | (version >> 8)
            yield i, name, info, other, shndx, version


def version_needs(region: Region, table: SectionTable, problems: list[str],
                  stop: Stop | None = None) -> list[VersionNeed]:
    """Every numbered ``GLIBC_``/``GLIBCXX_``/``CXXABI_``/``GCC_`` version the file needs, each
    with the first symbol bound to it (one pass over the symbols, keeping one name per
    version)."""
    t = _Tables(region, table, problems, stop)
    needs = _needs(t)
    wanted: dict[int, tuple[str, str, str]] = {}
    for index, (library, text) in sorted(needs.items()):
        match = _NUMBERED.match(text)
        if match is not None:
            wanted[index] = (match[1], match[2], library)
        elif _PREFIXED.match(text):
            problems.append(f"version need {text[:40]!r}{'...' if len(text) > 40 else ''}"
                            " is not a version this reader reads (at most 8 numbers of at "
                            "most 9 digits)")
    if not wanted:
        return []
    first: dict[int, str] = {}
    symbols = _Symbols(t)
    if symbols.versions is None:
        return [VersionNeed(*need) for need in wanted.values()]
    for _i, name, _info, _other, shndx, version in symbols:
        index = version & 0x7FFF
        if shndx == 0 and index in wanted and index not in first:
            bound = symbols.names.at(name)
            if bound is not None:
                first[index] = bound
            if len(first) == len(wanted):
                break
    return [VersionNeed(prefix, number, library, first.get(index))
            for index, (prefix, number, library) in wanted.items()]


def version_floors(needs: list[VersionNeed]) -> tuple[VersionNeed, ...]:
    """The highest need of each prefix (in :data:`FLOOR_PREFIXES` order)."""
    best: dict[str, VersionNeed] = {}
    for need in needs:
        held = best.get(need.prefix)
        if held is None or version_key(need.version) > version_key(held.version) or (
                need.version == held.version and held.symbol is None and need.symbol):
            best[need.prefix] = need
    return tuple(best[p] for p in FLOOR_PREFIXES if p in best)


def exported_symbols(region: Region, table: SectionTable, problems: list[str],
                     stop: Stop | None = None) -> tuple[ExportedSymbol, ...]:
    """The dynamic symbols the file defines with global or weak binding and default or
    protected visibility (what ``objdump -T`` lists as defined), sorted; at most
    :data:`MAX_EXPORTS` of them (more is a problem)."""
    t = _Tables(region, table, problems, stop)
    symbols = _Symbols(t)
    names = _definitions(t) if symbols.versions is not None else {}
    found: set[ExportedSymbol] = set()
    for _i, offset, info, other, shndx, index in symbols:
        if not offset or shndx == 0 or info >> 4 not in _BINDS or (other & 3) in (1, 2):
            continue
        if (info & 0xF) in (3, 4):     # section and file symbols
            continue
        name = symbols.names.at(offset)
        if not name:
            continue
        version = names.get(index & 0x7FFF) if (index & 0x7FFF) > 1 else None
        if shndx == _SHN_ABS and name == version:
            continue   # the marker symbol GNU ld defines for each version node
        if len(found) >= MAX_EXPORTS:
            problems.append(f"more than {MAX_EXPORTS} exported symbols: the rest are not "
                            "listed")
            break
        found.add(ExportedSymbol(name, version, not index & 0x8000,
                                 _TYPES.get(info & 0xF, "other")))
    return tuple(sorted(found))
