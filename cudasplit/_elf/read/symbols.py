"""Symbol versions of an ELF file: the versions it needs (its glibc floor), the symbols it exports.

Read from the sections ``readelf -V`` and ``objdump -T`` read: ``.gnu.version_r`` (version
needs: ``GLIBC_2.27`` from ``libc.so.6``), ``.gnu.version_d`` (the versions the file defines),
``.gnu.version`` (one version index per dynamic symbol) and ``.dynsym``. The floor of a prefix
(``GLIBC``, ``GLIBCXX``, ``CXXABI``, ``GCC``) is the highest numbered version of it the file
needs; it is named with the first symbol bound to that version (what conda-forge's
``check-glibc`` and a person with ``nm`` look for).

Every table is read once, whole, when it is at most :data:`MAX_TABLE` bytes (else a problem);
the record chains are walked inside those bytes with cycles refused and at most one step per
record the table can hold. Damage is a problem string, never an exception.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from cudasplit._elf.read.const import SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM
from cudasplit._elf.read.sections import Region, Section, SectionTable

__all__ = ["FLOOR_PREFIXES", "MAX_TABLE", "ExportedSymbol", "VersionNeed", "exported_symbols",
           "version_floors", "version_key", "version_needs"]

MAX_TABLE = 1 << 26          # 64 MiB: bigger symbol or string tables are not read
FLOOR_PREFIXES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC")
_NUMBERED = re.compile(r"^(GLIBCXX|GLIBC|CXXABI|GCC)_(\d+(?:\.\d+)*)$")
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
    """``2.27`` -> ``(2, 27)``: versions compare as numbers, not text."""
    return tuple(int(part) for part in version.split("."))


class _Tables:
    """The symbol and version tables of one region, each read once."""

    def __init__(self, region: Region, table: SectionTable, problems: list[str]) -> None:
        self.region, self.table, self.problems = region, table, problems
        self.fmt = _SYM.get(table.bits)
        self.bo = table.bo

    def complain(self, text: str) -> None:
        self.problems.append(text)

    def read(self, section: Section | None) -> bytes:
        if section is None:
            return b""
        if section.size > MAX_TABLE:
            self.problems.append(f"{section.name}: {section.size} bytes, more than this reader "
                                 "reads")
            return b""
        data = self.region.pread(section.size, section.offset)
        if len(data) != section.size:
            self.problems.append(f"{section.name} runs past the end of the file")
        return data

    def first(self, sh_type: int) -> Section | None:
        found = self.table.of_type(sh_type)
        return found[0] if found else None

    def strings(self, section: Section | None) -> bytes:
        linked = self.table.at(section.link) if section is not None else None
        return self.read(linked)


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset) if offset < len(table) else -1
    return table[offset:end].decode("utf-8", "surrogateescape") if end >= 0 else ""


def _needs(t: _Tables) -> dict[int, tuple[str, str]]:
    """Version index -> (library, version name) from ``.gnu.version_r``. Records and their
    aux records together take at most one step per 16 bytes of the table."""
    section = t.first(SHT_GNU_VERNEED)
    data, names = t.read(section), t.strings(section)
    found: dict[int, tuple[str, str]] = {}
    steps = [len(data) // 16]
    off = 0
    while data and off + 16 <= len(data) and steps[0] > 0:
        steps[0] -= 1
        _ver, count, file, aux, nxt = struct.unpack_from(t.bo + "HHIII", data, off)
        _need_aux(t, data, names, off + aux, count, _string(names, file), found, steps)
        if not nxt:
            return found
        off += nxt
    if data:
        t.complain(".gnu.version_r: the version need chain is damaged")
    return found


def _need_aux(t: _Tables, data: bytes, names: bytes, off: int, count: int, library: str,
              found: dict[int, tuple[str, str]], steps: list[int]) -> None:
    while count and off + 16 <= len(data) and steps[0] > 0:
        steps[0] -= 1
        _hash, _flags, index, name, nxt = struct.unpack_from(t.bo + "IHHII", data, off)
        found[index & 0x7FFF] = (library, _string(names, name))
        count -= 1
        if not nxt:
            return
        off += nxt


def _definitions(t: _Tables) -> dict[int, str]:
    """Version index -> version name from ``.gnu.version_d`` (the base entry included); at
    most one step per 20 bytes of the table."""
    section = t.first(SHT_GNU_VERDEF)
    data, names = t.read(section), t.strings(section)
    found: dict[int, str] = {}
    off, steps = 0, len(data) // 20
    while data and off + 20 <= len(data) and steps > 0:
        steps -= 1
        _ver, _flags, index, _count, _hash, aux, nxt = struct.unpack_from(t.bo + "HHHHIII", data,
                                                                        off)
        if off + aux + 8 <= len(data):
            found[index & 0x7FFF] = _string(names, struct.unpack_from(t.bo + "I", data,
                                                                      off + aux)[0])
        if not nxt:
            return found
        off += nxt
    if data:
        t.complain(".gnu.version_d: the version definition chain is damaged")
    return found


def _symbols(t: _Tables) -> tuple[list[tuple[str, int, int, int, int]], list[int]]:
    """(name, info, other, shndx, index) of each dynamic symbol, and their version indexes."""
    dynsym = t.first(SHT_DYNSYM)
    if dynsym is None or t.fmt is None:
        return [], []
    data, names = t.read(dynsym), t.strings(dynsym)
    fmt = struct.Struct(t.bo + t.fmt)
    rows = []
    for i in range(len(data) // fmt.size):
        fields = fmt.unpack_from(data, i * fmt.size)
        if t.table.bits == 64:
            name, info, other, shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            name, info, other, shndx = fields[0], fields[3], fields[4], fields[5]
        rows.append((_string(names, name), info, other, shndx, i))
    raw = t.read(t.first(SHT_GNU_VERSYM))
    versions = list(struct.unpack_from(f"{t.bo}{len(raw) // 2}H", raw)) if raw else []
    return rows, versions


def version_needs(region: Region, table: SectionTable, problems: list[str]) -> list[VersionNeed]:
    """Every numbered ``GLIBC_``/``GLIBCXX_``/``CXXABI_``/``GCC_`` version the file needs, each
    with the first symbol bound to it."""
    t = _Tables(region, table, problems)
    needs = _needs(t)
    if not needs:
        return []
    rows, versions = _symbols(t)
    first: dict[int, str] = {}
    for (name, _info, _other, shndx, i) in rows:
        if shndx == 0 and i < len(versions):
            first.setdefault(versions[i] & 0x7FFF, name)
    found = []
    for index, (library, version) in sorted(needs.items()):
        match = _NUMBERED.match(version)
        if match is not None:
            found.append(VersionNeed(match[1], match[2], library, first.get(index)))
    return found


def version_floors(needs: list[VersionNeed]) -> tuple[VersionNeed, ...]:
    """The highest need of each prefix (in :data:`FLOOR_PREFIXES` order)."""
    best: dict[str, VersionNeed] = {}
    for need in needs:
        held = best.get(need.prefix)
        if held is None or version_key(need.version) > version_key(held.version) or (
                need.version == held.version and held.symbol is None and need.symbol):
            best[need.prefix] = need
    return tuple(best[p] for p in FLOOR_PREFIXES if p in best)


def exported_symbols(region: Region, table: SectionTable,
                     problems: list[str]) -> tuple[ExportedSymbol, ...]:
    """The dynamic symbols the file defines with global or weak binding and default or
    protected visibility (what ``objdump -T`` lists as defined), sorted."""
    t = _Tables(region, table, problems)
    rows, versions = _symbols(t)
    names = _definitions(t) if versions else {}
    found = set()
    for (name, info, other, shndx, i) in rows:
        if not name or shndx == 0 or info >> 4 not in _BINDS or (other & 3) in (1, 2):
            continue
        if (info & 0xF) in (3, 4):     # section and file symbols
            continue
        index = versions[i] if i < len(versions) else 1
        version = names.get(index & 0x7FFF) if (index & 0x7FFF) > 1 else None
        if shndx == _SHN_ABS and name == version:
            continue   # the marker symbol GNU ld defines for each version node
        found.add(ExportedSymbol(name, version, not index & 0x8000,
                                 _TYPES.get(info & 0xF, "other")))
    return tuple(sorted(found))
