"""The one low-level ELF reader: headers, program/section headers, the dynamic array, strings.

Both the facts (:mod:`cudasplit._elf.read.info`) and the writer
(:mod:`cudasplit._elf.patch.patcher`) read through this
module. Every read is an ``os.pread`` bounded by the file size; every walk over file-controlled
counts and offsets (version need/def chains, symbol tables, notes) is bounded by the file size
and detects cycles, so a small hostile file cannot make a walk run long or allocate much.
Failures raise :class:`~cudasplit.errors.ElfError` with a one-line message naming the file.

The reading is split by what is read: the numbers (:mod:`cudasplit._elf.read.const`), the parsed
file and its bounded reads (:mod:`cudasplit._elf.read.raw`), the headers
(:mod:`cudasplit._elf.read.headers`),
the dynamic array and its strings (:mod:`cudasplit._elf.read.dynamic`) and the bounded walks
(:mod:`cudasplit._elf.read.walk`). This module opens and parses a file in that order and keeps every
name importable from here.
"""

from __future__ import annotations

import os

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
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERDEFNUM,
    DT_VERNEED,
    DT_VERNEEDNUM,
    DT_VERSYM,
    ELF_MAGIC,
    MAX_NOTE_BYTES,
    NT_GNU_BUILD_ID,
    PAGE,
    PATH_TAGS,
    PF_R,
    PT_DYNAMIC,
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
    SHT_PROGBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
    STRING_TAGS,
)
from cudasplit._elf.read.dynamic import DynNames, dyn_names, read_dynamic
from cudasplit._elf.read.headers import (
    ElfIdent,
    check_phdrs,
    elf_ident,
    read_header,
    read_phdrs,
    read_shdrs,
)
from cudasplit._elf.read.raw import Phdr, RawElf, Shdr, align_up
from cudasplit._elf.read.walk import (
    VersionRef,
    dynstr_section,
    has_build_id,
    symbol_name_refs,
    version_refs,
)

__all__ = [
    "ADDRESS_TAGS",
    "DT_GNU_HASH",
    "DT_HASH",
    "DT_NEEDED",
    "DT_NULL",
    "DT_RPATH",
    "DT_RUNPATH",
    "DT_SONAME",
    "DT_STRSZ",
    "DT_STRTAB",
    "DT_SYMTAB",
    "DT_VERDEF",
    "DT_VERDEFNUM",
    "DT_VERNEED",
    "DT_VERNEEDNUM",
    "DT_VERSYM",
    "ELF_MAGIC",
    "MAX_NOTE_BYTES",
    "NT_GNU_BUILD_ID",
    "PAGE",
    "PATH_TAGS",
    "PF_R",
    "PT_DYNAMIC",
    "PT_GNU_PROPERTY",
    "PT_INTERP",
    "PT_LOAD",
    "PT_NOTE",
    "PT_NULL",
    "PT_PHDR",
    "SHT_DYNSYM",
    "SHT_GNU_HASH",
    "SHT_GNU_VERDEF",
    "SHT_GNU_VERNEED",
    "SHT_GNU_VERSYM",
    "SHT_HASH",
    "SHT_NOBITS",
    "SHT_NOTE",
    "SHT_PROGBITS",
    "SHT_STRTAB",
    "SHT_SYMTAB",
    "STRING_TAGS",
    "DynNames",
    "ElfIdent",
    "Phdr",
    "RawElf",
    "Shdr",
    "VersionRef",
    "align_up",
    "check_phdrs",
    "dyn_names",
    "dynstr_section",
    "elf_ident",
    "has_build_id",
    "open_raw",
    "read_dynamic",
    "read_raw",
    "symbol_name_refs",
    "version_refs",
]


def read_raw(path: str, fd: int, *, need_dynamic: bool = True, strict: bool = True) -> RawElf:
    """Parse headers, program headers, section headers and the dynamic array of an open file.

    ``strict`` (the writer): refuse what the loader would refuse or what could not be edited
    safely, and read the section headers. Not strict (the facts of :mod:`cudasplit._elf.read.info`):
    files without program headers (``.o``) are fine, only the dynamic array is read.
    """
    size = os.fstat(fd).st_size
    h = read_header(path, fd, strict)
    elf = RawElf(path=path, fd=fd, size=size, phdrs=[], shdrs=[],
                 **h)  # type: ignore[arg-type]
    elf.phdrs = read_phdrs(elf)
    if strict:
        if elf.e_type not in (2, 3):  # LIEF aborts on e_type 7 (issue 15.3); ld.so loads neither
            raise elf.fail(f"e_type {elf.e_type} is neither an executable nor a shared object")
        check_phdrs(elf)
        elf.shdrs = read_shdrs(elf)
    read_dynamic(elf, strict)
    if need_dynamic and elf.dyn is None:
        from cudasplit.errors import PatchError
        raise PatchError(f"{path}: no dynamic section (static or relocatable file)")
    return elf


def open_raw(path: str, *, need_dynamic: bool = True) -> RawElf:
    """``read_raw`` on a file opened read-only (the descriptor is closed on error)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_raw(path, fd, need_dynamic=need_dynamic)
    except BaseException:
        os.close(fd)
        raise
