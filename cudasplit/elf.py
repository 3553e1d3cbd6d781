"""Read-only ELF queries.

Everything here reads through the program headers (``PT_DYNAMIC``, ``PT_INTERP``), the way the
dynamic loader does, not through the section headers: stripped or oddly linked files still answer,
and the cost is a handful of small ``pread`` calls whatever the file size (about 0.1 ms on the
749 MB libcublasLt), in constant memory.

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

from cudasplit.errors import ElfError
from cudasplit.model import Kind

__all__ = ["ElfInfo", "is_elf", "kind_from_head", "read_elf_info"]

log = logging.getLogger(__name__)

ELF_MAGIC = b"\x7fELF"
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
    if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
        return Kind.ELF_OTHER
    bo = "<" if head[5] == 1 else ">"
    is64 = head[4] == 2
    if is64 and len(head) < 64:
        return Kind.ELF_OTHER
    e_type = struct.unpack_from(bo + "H", head, 16)[0]
    interp = _head_has_interp(head, bo, is64) if e_type == _ET_DYN else False
    return _kind_of(e_type, bool(interp))


_MACHINES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
_TYPES = {v: k for k, v in ENUM_E_TYPE.items() if isinstance(v, int)}
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 1, 5, 10, 14, 15, 29
_CHUNK = 4096


class _Reader:
    """Bounds-checked reads of one open file; every failure is an ElfError naming it."""

    def __init__(self, name: str, fd: int) -> None:
        self.name, self.fd = name, fd
        self.size = os.fstat(fd).st_size
        self.loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz) of each PT_LOAD

    def fail(self, what: str) -> ElfError:
        return ElfError(f"{self.name}: corrupt or truncated ELF file ({what})")

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(f"{length} bytes at {offset:#x} lie past the end ({self.size:#x})")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise self.fail(f"short read at {offset:#x}")
        return data

    def string(self, offset: int, limit: int) -> str:
        """NUL-terminated string at `offset`, which must end before `limit`."""
        out = b""
        while True:
            chunk = self.read(offset + len(out), min(_CHUNK, limit - offset - len(out)))
            end = chunk.find(b"\0")
            if end >= 0:
                return (out + chunk[:end]).decode("utf-8", "surrogateescape")
            if not chunk:
                raise self.fail(f"unterminated string at {offset:#x}")
            out += chunk

    def offset_of(self, vaddr: int, length: int) -> int:
        """Map an address range to file bytes through PT_LOAD, like the loader does."""
        for seg_vaddr, seg_off, filesz in self.loads:
            if seg_vaddr <= vaddr and vaddr + length <= seg_vaddr + filesz:
                return seg_off + vaddr - seg_vaddr
        raise self.fail(f"address {vaddr:#x} is not in any PT_LOAD")


def _header(r: _Reader) -> tuple[str, bool, tuple[int, ...]]:
    ident = r.read(0, 16) if r.size >= 16 else b""
    if len(ident) < 16 or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise r.fail("bad ELF identification")
    bo, is64 = ("<" if ident[5] == 1 else ">"), ident[4] == 2
    fmt = bo + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH")
    return bo, is64, struct.unpack(fmt, r.read(16, struct.calcsize(fmt)))


def _segments(r: _Reader, bo: str, is64: bool, phoff: int, phentsize: int, phnum: int,
              ) -> list[tuple[int, int, int, int]]:
    """(p_type, p_offset, p_vaddr, p_filesz) of every program header."""
    fmt = bo + ("IIQQQQQQ" if is64 else "IIIIIIII")
    if phnum and phentsize != struct.calcsize(fmt):
        raise r.fail(f"program header size {phentsize}")
    table = r.read(phoff, phnum * phentsize)
    out = []
    for rec in struct.iter_unpack(fmt, table):
        # ELF64: type, flags, offset, vaddr, ...; ELF32: type, offset, vaddr, paddr, filesz, ...
        p_type, p_offset, p_vaddr, p_filesz = (rec[0], rec[2], rec[3], rec[5]) if is64 \
            else (rec[0], rec[1], rec[2], rec[4])
        out.append((p_type, p_offset, p_vaddr, p_filesz))
    return out


def _dynamic(r: _Reader, bo: str, is64: bool, offset: int, filesz: int) -> list[tuple[int, int]]:
    fmt = bo + ("qQ" if is64 else "iI")
    entries: list[tuple[int, int]] = []
    whole = filesz - filesz % struct.calcsize(fmt)
    for tag, value in struct.iter_unpack(fmt, r.read(offset, whole)):
        if tag == 0:
            return entries
        entries.append((tag, value))
    raise r.fail("dynamic array without DT_NULL")


def _parse(r: _Reader) -> ElfInfo:
    bo, is64, hdr = _header(r)
    e_type, e_machine, phoff, phentsize, phnum = hdr[0], hdr[1], hdr[4], hdr[8], hdr[9]
    segs = _segments(r, bo, is64, phoff, phentsize, phnum)
    r.loads = [(vaddr, off, filesz) for t, off, vaddr, filesz in segs if t == _PT_LOAD]
    interp = next((r.string(off, off + filesz) for t, off, _, filesz in segs
                   if t == _PT_INTERP), None)
    dyn = next(((off, filesz) for t, off, _, filesz in segs if t == _PT_DYNAMIC), None)
    entries = _dynamic(r, bo, is64, *dyn) if dyn else []
    strings = _strings(r, entries)
    return ElfInfo(
        elf_class=64 if is64 else 32,
        little_endian=bo == "<",
        machine=_MACHINES.get(e_machine, str(e_machine)),
        elf_type=_TYPES.get(e_type, str(e_type)),
        kind=_kind_of(e_type, interp is not None),
        has_dynamic=dyn is not None,
        interp=interp,
        soname=strings.get(_DT_SONAME, [None])[-1],
        needed=tuple(s for s in strings.get(_DT_NEEDED, []) if s is not None),
        runpath=strings.get(_DT_RUNPATH, [None])[-1],
        rpath=strings.get(_DT_RPATH, [None])[-1],
    )


def _strings(r: _Reader, entries: list[tuple[int, int]]) -> dict[int, list[str | None]]:
    """Resolve the string-valued tags we report through DT_STRTAB/DT_STRSZ."""
    wanted = [(t, v) for t, v in entries if t in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH)]
    if not wanted:
        return {}
    tags = dict(entries)
    strtab, strsz = tags.get(_DT_STRTAB), tags.get(_DT_STRSZ)
    if strtab is None or strsz is None:
        raise r.fail("DT_STRTAB or DT_STRSZ missing")
    base = r.offset_of(strtab, strsz)
    out: dict[int, list[str | None]] = {}
    for tag, value in wanted:
        if value >= strsz:
            raise r.fail(f"string offset {value:#x} beyond DT_STRSZ {strsz:#x}")
        out.setdefault(tag, []).append(r.string(base + value, base + strsz))
    return out


def read_elf_info(path: str | os.PathLike[str]) -> ElfInfo | None:
    """Facts of one file: ``None`` when it is not ELF, ElfError when it is ELF but damaged."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as stream:
            if stream.read(4) != ELF_MAGIC:
                return None
            return _parse(_Reader(name, stream.fileno()))
    except OSError as exc:
        raise ElfError(f"{name}: cannot read ELF file ({exc.strerror or exc})") from exc
    except struct.error as exc:  # a record cut short: same as truncation
        raise ElfError(f"{name}: corrupt or truncated ELF file ({exc})") from exc
