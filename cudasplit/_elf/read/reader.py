"""Open and parse one ELF file in order: header, program headers, section headers, dynamic array."""

from __future__ import annotations

import os

from cudasplit._elf.read.dynamic import read_dynamic
from cudasplit._elf.read.headers import check_phdrs, read_header, read_phdrs, read_shdrs
from cudasplit._elf.read.raw import RawElf

__all__ = ["open_raw", "read_raw"]


def read_raw(path: str, fd: int, *, need_dynamic: bool = True, strict: bool = True) -> RawElf:
    """Parse headers, program headers, section headers and the dynamic array of an open file.

    ``strict`` (the writer): refuse what the loader would refuse or what could not be edited
    safely, and read the section headers. Not strict (the facts of ``info``):
    files without program headers (``.o``) are fine, only the dynamic array is read.
    """
    size = os.fstat(fd).st_size
    h = read_header(path, fd, strict)
    elf = RawElf(path=path, fd=fd, size=size, phdrs=[], shdrs=[],
                 **h)  # type: ignore[arg-type]
    elf.phdrs = read_phdrs(elf)
    if strict:
        if elf.e_type not in (2, 3):  # LIEF aborts on e_type 7; ld.so loads neither
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
