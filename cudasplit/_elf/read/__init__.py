"""Reading ELF files: the one low-level reader, the facts the split needs, and dlopen targets.

Every read is an ``os.pread`` bounded by the file size; every walk over file-controlled counts
and offsets (version need/def chains, symbol tables, notes) is bounded by the file size and
detects cycles, so a small hostile file cannot make a walk run long or allocate much. Failures
raise :class:`~cudasplit.errors.ElfError` with a one-line message naming the file.

By what is read: the numbers (``const``), the parsed file and its bounded reads (``raw``), the
headers (``headers``), the dynamic array and its strings (``dynamic``), the bounded walks
(``walk``), opening and parsing a file in that order (``reader``); on top, the facts of one file
(``info``), the names the loader treats specially (``libnames``) and dlopen targets
(``dlopen``). What a file carries: its sections by name in any part of a file (``sections``),
static archive members (``archive``), fatbinary GPU code (``fatbin``), symbol versions and
exports (``symbols``), GPU code and the glibc floor of one file (``gpucode``), and those reads
in a process of its own, beside a split (``worker``); what all of these share (the capped
problems of one file and the stop check: ``bounds``). This face names what the rest of the
package uses.
"""

from __future__ import annotations

from cudasplit._elf.read.archive import AR_MAGIC
from cudasplit._elf.read.bounds import MAX_PROBLEMS, Stopped
from cudasplit._elf.read.const import (
    ADDRESS_TAGS,
    DT_GNU_HASH,
    DT_HASH,
    DT_NEEDED,
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERNEED,
    DT_VERSYM,
    ELF_MAGIC,
    PAGE,
    PATH_TAGS,
    PF_R,
    PF_W,
    PT_DYNAMIC,
    PT_GNU_PROPERTY,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_NULL,
    PT_PHDR,
    SHT_DYNAMIC,
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
)
from cudasplit._elf.read.dlopen import DlopenTarget, scan_dlopen
from cudasplit._elf.read.dynamic import DynNames, dyn_names
from cudasplit._elf.read.fatbin import FatbinEntry
from cudasplit._elf.read.gpucode import (
    MAX_ARCH_ROWS,
    GpuCode,
    Inside,
    arch_key,
    fatbin_entries,
    read_exports,
    read_inside,
)
from cudasplit._elf.read.headers import elf_ident
from cudasplit._elf.read.info import ElfInfo, is_elf, kind_from_head, read_elf_info
from cudasplit._elf.read.libnames import (
    index_library_paths,
    is_driver_name,
    is_glibc_name,
)
from cudasplit._elf.read.machine import (
    EM_AARCH64,
    EM_PPC64,
    EM_X86_64,
    MACHINE_NAMES,
    elf_machine,
    machine_name,
    machine_of_tree,
)
from cudasplit._elf.read.raw import Phdr, RawElf, Shdr, align_up
from cudasplit._elf.read.reader import open_raw, read_raw
from cudasplit._elf.read.sections import Region, read_sections
from cudasplit._elf.read.symbols import ExportedSymbol, VersionNeed, version_key
from cudasplit._elf.read.walk import dynstr_section, has_build_id, symbol_name_refs, version_refs
from cudasplit._elf.read.worker import FileRead, ReaderProcess

__all__ = [
    "ADDRESS_TAGS",
    "AR_MAGIC",
    "DT_GNU_HASH",
    "DT_HASH",
    "DT_NEEDED",
    "DT_NULL",
    "DT_RPATH",
    "DT_RUNPATH",
    "DT_STRSZ",
    "DT_STRTAB",
    "DT_SYMTAB",
    "DT_VERDEF",
    "DT_VERNEED",
    "DT_VERSYM",
    "ELF_MAGIC",
    "EM_AARCH64",
    "EM_PPC64",
    "EM_X86_64",
    "MACHINE_NAMES",
    "MAX_ARCH_ROWS",
    "MAX_PROBLEMS",
    "PAGE",
    "PATH_TAGS",
    "PF_R",
    "PF_W",
    "PT_DYNAMIC",
    "PT_GNU_PROPERTY",
    "PT_INTERP",
    "PT_LOAD",
    "PT_NOTE",
    "PT_NULL",
    "PT_PHDR",
    "SHT_DYNAMIC",
    "SHT_DYNSYM",
    "SHT_GNU_HASH",
    "SHT_GNU_VERDEF",
    "SHT_GNU_VERNEED",
    "SHT_GNU_VERSYM",
    "SHT_HASH",
    "SHT_NOBITS",
    "SHT_NOTE",
    "SHT_SYMTAB",
    "STRING_TAGS",
    "DlopenTarget",
    "DynNames",
    "ElfInfo",
    "ExportedSymbol",
    "FatbinEntry",
    "FileRead",
    "GpuCode",
    "Inside",
    "Phdr",
    "RawElf",
    "ReaderProcess",
    "Region",
    "Shdr",
    "Stopped",
    "VersionNeed",
    "align_up",
    "arch_key",
    "dyn_names",
    "dynstr_section",
    "elf_ident",
    "elf_machine",
    "fatbin_entries",
    "has_build_id",
    "index_library_paths",
    "is_driver_name",
    "is_elf",
    "is_glibc_name",
    "kind_from_head",
    "machine_name",
    "machine_of_tree",
    "open_raw",
    "read_elf_info",
    "read_exports",
    "read_inside",
    "read_raw",
    "read_sections",
    "scan_dlopen",
    "symbol_name_refs",
    "version_key",
    "version_refs",
]
