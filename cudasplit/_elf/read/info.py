"""Read-only ELF queries.

Everything here reads through the program headers (``PT_DYNAMIC``, ``PT_INTERP``), the way the
dynamic loader does, not through the section headers: stripped or oddly linked files still answer,
and the cost is a handful of small ``pread`` calls whatever the file size (about 0.1 ms on the
749 MB libcublasLt), in constant memory. The reading itself is :mod:`cudasplit._elf.read`, the one
reader the writer (:mod:`cudasplit._elf.patch.patcher`) uses too, in its non-strict mode.

The records are decoded with :mod:`struct`; pyelftools supplies the names (``EM_*``, ``ET_*``).
Its own object model was measured at ~1 ms per file: ``DynamicSegment`` walks every section
header and each construct record costs ~10 us, which alone would exceed the patcher's budget
(it reads every file twice: before and after writing).

"Not an ELF file" is a normal answer (``None``); an ELF file that cannot be parsed raises
:class:`~cudasplit.errors.ElfError` with a one-line message naming the file.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE

from cudasplit._elf.read.const import (
    DT_NEEDED,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    ELF_MAGIC,
    PT_INTERP,
)
from cudasplit._elf.read.dynamic import collect
from cudasplit._elf.read.headers import elf_ident
from cudasplit._elf.read.raw import RawElf
from cudasplit._elf.read.reader import read_raw
from cudasplit._model import Kind
from cudasplit.errors import ElfError

__all__ = ["ElfInfo", "is_elf", "kind_from_head", "read_elf_info"]

log = logging.getLogger(__name__)

_ET_EXEC = 2
_ET_DYN = 3
_PT_INTERP = 3

@dataclass(frozen=True, slots=True)
class ElfInfo:
    """What cudasplit needs to know about one ELF file."""

    elf_class: int  # 32 or 64
    little_endian: bool
    machine: str  # pyelftools e_machine string: "EM_X86_64", "EM_AARCH64", "EM_PPC64", ...
    elf_type: str  # "ET_DYN", "ET_EXEC", "ET_REL", ...
    kind: Kind  # ELF_SHARED, ELF_EXEC or ELF_OTHER (see :func:`kind_from_head`)
    has_dynamic: bool  # has PT_DYNAMIC (static executables and .o files do not)
    interp: str | None
    soname: str | None
    needed: tuple[str, ...]
    runpath: str | None  # DT_RUNPATH, None when absent
    rpath: str | None  # DT_RPATH, None when absent


def is_elf(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts with the ELF magic."""
    return head[:4] == ELF_MAGIC


def _kind_of(e_type: int, has_interp: bool) -> Kind:
    # A PIE executable is ET_DYN like a library; only PT_INTERP tells them apart (what `file` does).
    if e_type == _ET_EXEC or (e_type == _ET_DYN and has_interp):
        return Kind.ELF_EXEC
    if e_type == _ET_DYN:
        return Kind.ELF_SHARED
    return Kind.ELF_OTHER


def _head_has_interp(head: bytes, bo: str, is64: bool) -> bool | None:
    """PT_INTERP present? None when the program headers do not lie inside ``head``."""
    # e_phoff, then e_phentsize/e_phnum, sit at different offsets in the two classes.
    if is64:
        (phoff,) = struct.unpack_from(bo + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(bo + "HH", head, 54)
    else:
        (phoff,) = struct.unpack_from(bo + "I", head, 28)
        phentsize, phnum = struct.unpack_from(bo + "HH", head, 42)
    if phnum == 0:
        return False
    if phentsize < 4 or phoff + phentsize * phnum > len(head):
        return None
    return any(
        struct.unpack_from(bo + "I", head, phoff + i * phentsize)[0] == _PT_INTERP
        for i in range(phnum)
    )


def kind_from_head(head: bytes) -> Kind | None:
    """Classify from the first bytes of a file (up to 4 KiB), without touching the file.

    ``None`` when not ELF. Uses the program headers when they lie inside ``head`` (they normally
    follow the 64-byte ELF header), else ``e_type`` alone (a PIE then reads as ELF_SHARED).
    Never raises: a damaged header reads as ELF_OTHER.
    """
    if not is_elf(head):
        return None
    ident = elf_ident(head)
    if ident is None or len(head) < 52:
        return Kind.ELF_OTHER
    bo, is64 = ident.bo, ident.bits == 64
    if is64 and len(head) < 64:
        return Kind.ELF_OTHER
    e_type = struct.unpack_from(bo + "H", head, 16)[0]
    interp = _head_has_interp(head, bo, is64) if e_type == _ET_DYN else False
    return _kind_of(e_type, bool(interp))


_MACHINES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
_TYPES = {v: k for k, v in ENUM_E_TYPE.items() if isinstance(v, int)}


def _parse(elf: RawElf) -> ElfInfo:
    """Facts from the one reader (:mod:`cudasplit._elf.read`), read like the loader reads them."""
    interp_ph = next((ph for ph in elf.phdrs if ph.p_type == PT_INTERP), None)
    interp = None if interp_ph is None else \
        elf.string_at(interp_ph.p_offset, interp_ph.file_end).decode("utf-8", "surrogateescape")
    strings: dict[int, list[str]] = {}
    spent = [0]
    for tag, value in elf.entries:
        if tag in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH):
            text = collect(elf, value, spent).decode("utf-8", "surrogateescape")
            strings.setdefault(tag, []).append(text)
    return ElfInfo(
        elf_class=elf.bits,
        little_endian=elf.bo == "<",
        machine=_MACHINES.get(elf.e_machine, str(elf.e_machine)),
        elf_type=_TYPES.get(elf.e_type, str(elf.e_type)),
        kind=_kind_of(elf.e_type, interp is not None),
        has_dynamic=elf.dyn is not None,
        interp=interp,
        soname=_last(strings, DT_SONAME),
        needed=tuple(strings.get(DT_NEEDED, [])),
        runpath=_last(strings, DT_RUNPATH),
        rpath=_last(strings, DT_RPATH),
    )


def _last(strings: dict[int, list[str]], tag: int) -> str | None:
    """The loader uses the last entry of a tag that appears twice."""
    values = strings.get(tag)
    return values[-1] if values else None


def read_elf_info(path: str | os.PathLike[str]) -> ElfInfo | None:
    """Facts of one file: ``None`` when it is not ELF, ElfError when it is ELF but damaged."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            if stream.read(4) != ELF_MAGIC:
                return None
            return _parse(read_raw(name, stream.fileno(), need_dynamic=False, strict=False))
    except OSError as exc:
        raise ElfError(f"{name}: cannot read ELF file ({exc.strerror or exc})") from exc
    except struct.error as exc:  # a record cut short: same as truncation
        raise ElfError(f"{name}: corrupt or truncated ELF file ({exc})") from exc
