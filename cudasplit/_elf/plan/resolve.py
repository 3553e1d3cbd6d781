"""Where DT_NEEDED names outside the package are found, like Nixpkgs' autoPatchelf.

:class:`LibraryIndex` lists the shared objects of the ``--library-path`` directories (and, in
``--nix`` mode, the library directories of the build environment) once per run, with each
candidate's ELF class and machine: ``auto-patchelf.py`` skips a candidate of another
architecture (an x86_64 ``libstdc++.so.6`` cannot satisfy an aarch64 executable), and so does
:meth:`LibraryIndex.for_arch`. A name resolved nowhere is *unresolved*;
:func:`unresolved_error` turns all of them into one message.
"""

from __future__ import annotations

import fnmatch
import os
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from elftools.elf.enums import ENUM_E_MACHINE

from cudasplit._elf.read import elf_ident
from cudasplit._words import plural
from cudasplit.errors import SourceError, UnresolvedLibrariesError

__all__ = [
    "LibraryIndex",
    "arch_of",
    "ignored",
    "loader_arch",
    "parse_interpreters",
    "unresolved_error",
]

_SHARED_OBJECT_NAME = re.compile(r"\.so(\.|$)")
_MACHINES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
# pyelftools machine name (+ byte order for PowerPC) -> the arch names users type.
_ARCH = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_386": "i686",
    "EM_ARM": "armv7l",
    "EM_RISCV": "riscv64",
}


def arch_of(machine: str, little_endian: bool) -> str:
    """``EM_X86_64`` -> ``x86_64``, ``EM_PPC64`` little-endian -> ``ppc64le`` (``uname -m``)."""
    if machine == "EM_PPC64":
        return "ppc64le" if little_endian else "ppc64"
    return _ARCH.get(machine, machine)


@dataclass(frozen=True, slots=True)
class _Candidate:
    directory: str
    elf_class: int
    machine: str


@dataclass(slots=True)
class LibraryIndex:
    """Shared objects of some directories: name -> candidates (first directory first)."""

    candidates: dict[str, list[_Candidate]] = field(default_factory=dict)
    _by_arch: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)

    @classmethod
    def scan(cls, paths: Sequence[str]) -> LibraryIndex:
        """Read every directory once. Missing directories (and empty strings, which would
        mean the current directory) are skipped; relative ones are made absolute, so that no
        relative entry reaches a RUNPATH. Other listing errors raise SourceError."""
        index = cls()
        for directory in dict.fromkeys(p for p in paths if p):
            final = directory if os.path.isabs(directory) else os.path.abspath(directory)
            for name, elf_class, machine in _libraries(final):
                index.candidates.setdefault(name, []).append(
                    _Candidate(final, elf_class, machine))
        return index

    def for_arch(self, elf_class: int, machine: str) -> Mapping[str, str]:
        """Name -> first directory whose candidate has this ELF class and machine."""
        key = (elf_class, machine)
        if key not in self._by_arch:
            mapping: dict[str, str] = {}
            for name, found in self.candidates.items():
                hit = next((c.directory for c in found
                            if c.elf_class == elf_class and c.machine == machine), None)
                if hit is not None:
                    mapping[name] = hit
            self._by_arch[key] = mapping
        return self._by_arch[key]


def _libraries(directory: str) -> list[tuple[str, int, str]]:
    try:
        with os.scandir(directory) as listing:
            names = sorted(e.name for e in listing
                           if _SHARED_OBJECT_NAME.search(e.name) and not e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as error:
        raise SourceError(f"cannot list library path: {error.strerror}",
                          source=directory) from error
    found = []
    for name in names:
        header = _elf_header(os.path.join(directory, name))
        if header is not None:  # linker scripts (libc.so) and dangling links are no candidates
            found.append((name, *header))
    return found


def _elf_header(path: str) -> tuple[int, str] | None:
    """(ELF class, machine name) from the first 20 bytes; None for anything else."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(20)
    except OSError:
        return None
    ident = elf_ident(head)
    if ident is None:
        return None
    return ident.bits, _MACHINES.get(ident.machine, str(ident.machine))


def ignored(name: str, globs: Iterable[str]) -> bool:
    """Whether ``--ignore-missing`` accepts ``name`` (shell globs, like
    ``autoPatchelfIgnoreMissingDeps``; ``*`` accepts everything)."""
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def unresolved_error(missing: Mapping[str, Sequence[str]], report: object = None
                     ) -> UnresolvedLibrariesError:
    """One message for every file and name: ``path (a, b); path2 (c)`` plus the way out."""
    files = "; ".join(f"{path} ({', '.join(names)})" for path, names in missing.items())
    names = sorted({n for found in missing.values() for n in found})
    example = ", ".join(repr(n) for n in names[:3])
    return UnresolvedLibrariesError(
        f"{plural(len(names), 'library name')} needed by {plural(len(missing), 'file')} "
        f"{'resolves' if len(names) == 1 else 'resolve'} nowhere "
        f"(package outputs, library_paths, Nix build inputs): {files}. Add a directory "
        f"holding them to library_paths (in Nix: a buildInputs entry), or accept them by "
        f"name or glob in ignore_missing (e.g. {example})", report)


def loader_arch(path: str) -> str:
    """The arch a loader serves: from its own ELF header when the file is readable (a Nix
    builder has it), else the build machine's (``uname -m``)."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(20)
    except OSError:
        head = b""
    ident = elf_ident(head)
    machine = _MACHINES.get(ident.machine, "") if ident is not None else ""
    if ident is not None and machine:
        return arch_of(machine, ident.little_endian)
    return platform.machine()


def parse_interpreters(values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``--interpreter [ARCH=]PATH`` values -> (arch, path); without ``ARCH=`` the loader's
    own arch (see :func:`loader_arch`)."""
    result = []
    for value in values:
        arch, sep, path = value.partition("=")
        if not sep or arch.startswith("/"):
            arch, path = loader_arch(value), value
        result.append((arch, path))
    return tuple(result)
