"""Libraries an ELF file opens at run time (``dlopen``), found as strings in its read-only data.

NVIDIA's libraries load some dependencies with ``dlopen`` instead of ``DT_NEEDED``: libcublasLt
and libcufft open ``libnvrtc.so.12``, libcufft ``libnvJitLink.so.12``, cuDNN ``libnvrtc.so.%s``,
nearly all of them ``libcuda.so.1``. Those names sit NUL-terminated in ``.rodata``; nothing in
the dynamic section announces them. :func:`scan_dlopen` reads only the read-only data sections
(``.rodata``, ``.lrodata``; the read-only, non-executable ``PT_LOAD`` segments when there are
no section headers) in bounded chunks, never the multi-hundred-MB ``.nv_fatbin``, and returns
the names that are neither the file's own ``DT_NEEDED``/``SONAME`` nor glibc's, each with the
package that provides it (:data:`PROVIDERS`).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from cudasplit._elf.read.info import ElfInfo
from cudasplit._elf.read.libnames import is_driver_name, is_glibc_name
from cudasplit.errors import ElfError

__all__ = ["PROVIDERS", "DlopenTarget", "provider_of",
           "scan_dlopen"]

# Library stem (name up to ".so") -> the redistributable that ships it; "driver": the NVIDIA
# driver (found through the driver link at run time).
PROVIDERS: dict[str, str] = {
    "libnvrtc": "cuda_nvrtc",
    "libnvrtc-builtins": "cuda_nvrtc",
    "libnvJitLink": "libnvjitlink",
    "libcudart": "cuda_cudart",
    "libcublas": "libcublas",
    "libcublasLt": "libcublas",
    "libcufft": "libcufft",
    "libcurand": "libcurand",
    "libcusparse": "libcusparse",
    "libcusparseLt": "libcusparse_lt",
    "libcusolver": "libcusolver",
    "libnccl": "nccl",
    "libcupti": "cuda_cupti",
    "libnvperf_host": "cuda_cupti",
    "libnvToolsExt": "cuda_nvtx",
    "libnvvm": "cuda_nvcc",
    "libcudnn": "cudnn",
    "libnvinfer": "tensorrt",
    # Driver libraries outside the libcuda/libnvidia-* patterns (cupti, nvperf open them).
    "libEGL_nvidia": "driver",
    "libGLX_nvidia": "driver",
    "libnvoptix": "driver",
}

_NAME = re.compile(rb"lib[A-Za-z0-9_+-]{1,64}\.so(?:\.[0-9A-Za-z%.]{1,24})?(?=\x00)")
_CHUNK = 16 << 20
_OVERLAP = 128  # longer than any name the pattern accepts
_MAX_SECTIONS = 1 << 16
_SHT_PROGBITS, _SHF_WRITE, _SHF_EXECINSTR = 1, 0x1, 0x4
_PT_LOAD, _PF_X, _PF_W = 1, 0x1, 0x2


@dataclass(frozen=True, slots=True)
class DlopenTarget:
    name: str              # as found: "libnvrtc.so.12", "libnvrtc.so.%s"
    package: str | None    # PROVIDERS entry, "driver", or None when unknown


def provider_of(name: str) -> str | None:
    if is_driver_name(name):
        return "driver"
    stem = name.split(".so", 1)[0]
    return PROVIDERS.get(stem)


def scan_dlopen(path: str | os.PathLike[str], info: ElfInfo) -> tuple[DlopenTarget, ...]:
    """Names ``path`` may ``dlopen`` (see the module docstring), sorted. Raises ElfError for a
    file whose headers lie."""
    name = os.fspath(path)
    skip = {*info.needed, info.soname}
    found: set[str] = set()
    try:
        with open(name, "rb") as stream:
            fd = stream.fileno()
            size = os.fstat(fd).st_size
            for offset, length in _readonly_ranges(fd, size, info):
                found.update(_names_in(fd, offset, length))
    except OSError as exc:
        raise ElfError(f"{name}: cannot read ELF file ({exc.strerror or exc})") from exc
    except struct.error as exc:
        raise ElfError(f"{name}: corrupt or truncated ELF file ({exc})") from exc
    return tuple(DlopenTarget(n, provider_of(n)) for n in sorted(found)
                 if n not in skip and not is_glibc_name(n))


def _names_in(fd: int, offset: int, length: int) -> set[str]:
    found: set[str] = set()
    position, end = offset, offset + length
    while position < end:
        # Overlapping chunks: a name cut at a chunk border is whole in the next read.
        data = os.pread(fd, min(_CHUNK + _OVERLAP, end - position), position)
        if not data:
            break
        found.update(m.decode("ascii") for m in _NAME.findall(data))
        position += _CHUNK
    return found


def _readonly_ranges(fd: int, size: int, info: ElfInfo) -> Iterator[tuple[int, int]]:
    bo = "<" if info.little_endian else ">"
    is64 = info.elf_class == 64
    head = os.pread(fd, 64, 0)
    sections = list(_rodata_sections(fd, size, bo, is64, head))
    if sections:
        yield from sections
        return
    yield from _readonly_segments(fd, size, bo, is64, head)


def _rodata_sections(fd: int, size: int, bo: str, is64: bool, head: bytes
                     ) -> Iterator[tuple[int, int]]:
    if is64:
        (shoff,) = struct.unpack_from(bo + "Q", head, 40)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 58)
        fmt = bo + "IIQQQQIIQQ"
    else:
        (shoff,) = struct.unpack_from(bo + "I", head, 32)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 46)
        fmt = bo + "IIIIIIIIII"
    if not shoff or shnum == 0 or shnum > _MAX_SECTIONS or shentsize != struct.calcsize(fmt) \
            or shoff + shnum * shentsize > size or shstrndx >= shnum:
        return
    table = [struct.unpack_from(fmt, os.pread(fd, shnum * shentsize, shoff), i * shentsize)
             for i in range(shnum)]
    names_off, names_size = table[shstrndx][4], table[shstrndx][5]
    if names_off + names_size > size:
        return
    names = os.pread(fd, min(names_size, 1 << 20), names_off)
    for sh_name, sh_type, flags, _addr, offset, length, *_ in table:
        label = names[sh_name:names.find(b"\0", sh_name)] if sh_name < len(names) else b""
        if (sh_type == _SHT_PROGBITS and label in (b".rodata", b".lrodata")
                and not flags & (_SHF_WRITE | _SHF_EXECINSTR) and offset + length <= size):
            yield offset, length


def _readonly_segments(fd: int, size: int, bo: str, is64: bool, head: bytes
                       ) -> Iterator[tuple[int, int]]:
    if is64:
        (phoff,) = struct.unpack_from(bo + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(bo + "HH", head, 54)
        fmt, fields = bo + "IIQQQQQQ", (0, 1, 2, 5)   # type, flags, offset, filesz
    else:
        (phoff,) = struct.unpack_from(bo + "I", head, 28)
        phentsize, phnum = struct.unpack_from(bo + "HH", head, 42)
        fmt, fields = bo + "IIIIIIII", (0, 6, 1, 4)
    if phentsize != struct.calcsize(fmt) or phoff + phnum * phentsize > size:
        return
    table = os.pread(fd, phnum * phentsize, phoff)
    for i in range(phnum):
        record = struct.unpack_from(fmt, table, i * phentsize)
        p_type, flags, offset, length = (record[f] for f in fields)
        if p_type == _PT_LOAD and not flags & (_PF_X | _PF_W) and offset + length <= size:
            yield offset, length
