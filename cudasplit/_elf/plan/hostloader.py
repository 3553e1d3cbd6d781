"""Where this machine's own loader would find a library name: ``/etc/ld.so.cache``, then the
default directories of the file's architecture (``ld.so(8)``), candidates of another ELF class
or machine skipped as the loader skips them.

Outside Nix a name such as ``libstdc++.so.6`` that the host loader finds is no warning: the
split output runs on this kind of machine. In ``--nix`` mode the build sandbox has no host
libraries, so nothing here is consulted there. Only the few names nothing else resolved are
looked up, each once per architecture.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from cudasplit._elf.plan.resolve import _elf_header

__all__ = ["HostLoader", "default_dirs", "host_interpreter", "read_ld_so_cache"]

LD_SO_CACHE = "/etc/ld.so.cache"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = struct.Struct("=II B3x I 12x")      # nlibs, len_strings, flags, extension offset
_ENTRY = struct.Struct("=iIIIQ")              # flags, key, value, osversion, hwcap

# Debian's multiarch directories come first, then glibc's own lib64 (or lib) pair.
_TRIPLETS = {
    "EM_X86_64": "x86_64-linux-gnu",
    "EM_AARCH64": "aarch64-linux-gnu",
    "EM_PPC64": "powerpc64le-linux-gnu",
    "EM_386": "i386-linux-gnu",
    "EM_ARM": "arm-linux-gnueabihf",
    "EM_RISCV": "riscv64-linux-gnu",
}
_LOADERS = {
    "EM_X86_64": "/lib64/ld-linux-x86-64.so.2",
    "EM_AARCH64": "/lib/ld-linux-aarch64.so.1",
    "EM_PPC64": "/lib64/ld64.so.2",
    "EM_386": "/lib/ld-linux.so.2",
    "EM_ARM": "/lib/ld-linux-armhf.so.3",
    "EM_RISCV": "/lib/ld-linux-riscv64-lp64d.so.1",
}


def default_dirs(elf_class: int, machine: str) -> tuple[str, ...]:
    """The loader's trusted directories for files of this class and machine."""
    triplet = _TRIPLETS.get(machine)
    multiarch = (f"/lib/{triplet}", f"/usr/lib/{triplet}") if triplet else ()
    own = ("/lib64", "/usr/lib64") if elf_class == 64 else ("/lib", "/usr/lib")
    return (*multiarch, *own)


def host_interpreter(machine: str) -> str | None:
    """The standard glibc loader of this machine for ``machine``, when it is installed."""
    path = _LOADERS.get(machine)
    return path if path is not None and os.path.exists(path) else None


def read_ld_so_cache(path: str = LD_SO_CACHE) -> dict[str, tuple[str, ...]]:
    """Library name -> paths, in the cache's order; empty when the file is missing or not a
    cache this reader knows (glibc's new format, alone or after the old one)."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return {}
    start = data.find(_NEW_MAGIC)
    if start < 0:
        return {}
    try:
        return _entries(data, start)
    except (struct.error, IndexError, UnicodeDecodeError):
        return {}


def _entries(data: bytes, start: int) -> dict[str, tuple[str, ...]]:
    nlibs = _HEADER.unpack_from(data, start + len(_NEW_MAGIC))[0]
    first = start + len(_NEW_MAGIC) + _HEADER.size
    found: dict[str, list[str]] = {}
    for index in range(nlibs):
        _flags, key, value, _os, _hwcap = _ENTRY.unpack_from(data, first + index * _ENTRY.size)
        # String offsets count from the new header (glibc's dl-cache.c, cache_new).
        name, target = _string(data, start + key), _string(data, start + value)
        found.setdefault(name, []).append(target)
    return {name: tuple(paths) for name, paths in found.items()}


def _string(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode("utf-8", "surrogateescape")


@dataclass(slots=True)
class HostLoader:
    """The host loader's lookups (see the module docstring); ``cache`` as from
    :func:`read_ld_so_cache`, read on first use when not given."""

    cache: dict[str, tuple[str, ...]] | None = None
    _memo: dict[tuple[str, int, str], str | None] = field(default_factory=dict)

    def find(self, name: str, elf_class: int, machine: str) -> str | None:
        """The file the host loader would load for ``name``, or None."""
        key = (name, elf_class, machine)
        if key not in self._memo:
            self._memo[key] = self._find(name, elf_class, machine)
        return self._memo[key]

    def cache_paths(self, name: str) -> tuple[str, ...]:
        """The paths ``ld.so.cache`` lists for ``name`` (any architecture)."""
        if self.cache is None:
            self.cache = read_ld_so_cache()
        return self.cache.get(name, ())

    def _find(self, name: str, elf_class: int, machine: str) -> str | None:
        if not name or "/" in name:
            return None
        candidates = (*self.cache_paths(name),
                      *(os.path.join(d, name) for d in default_dirs(elf_class, machine)))
        return next((c for c in candidates if _fits(c, elf_class, machine)), None)


def _fits(path: str, elf_class: int, machine: str) -> bool:
    return _elf_header(path) == (elf_class, machine)
