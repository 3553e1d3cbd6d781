"""Ambiguous RUNPATHs: two directories of one file's search path hold a library of one name.

A RUNPATH is ambiguous when two of its directories hold a library of the same name that are not
the same file: the program is linked against two copies (cuBLAS 12.8 from one input, 12.9 from
another), and which one loads depends on the order of the entries, not on what the build meant.
The loader's own search is simulated by :mod:`cudasplit._release.ldd`; here every directory of the
file's ``DT_RUNPATH`` (``DT_RPATH`` when it has none) is listed, ``$ORIGIN`` expanded and the
``maps`` applied, and each shared-object name found in two or more of them is reported.

Not ambiguous: the same file reached twice (a symlink, a hard link, the same directory listed
twice), two copies with identical bytes, a candidate of another ELF class or machine (the loader
skips it), and driver libraries (``libcuda.so.1`` in cuda_compat before the driver link is the
whole point of cuda_compat; a stub in front of the driver is ``ldd``'s ``stub-shadows-driver``).
"""

from __future__ import annotations

import filecmp
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cudasplit._elf.plan import is_driver_name
from cudasplit._elf.read import ElfInfo, read_elf_info
from cudasplit._release.ldd import LddOptions, files_under, loadable
from cudasplit._searchpath import split_search_path
from cudasplit.errors import ElfError

__all__ = ["Ambiguity", "ambiguities_in", "ambiguities_of"]

_SHARED_OBJECT_NAME = re.compile(r"\.so(\.|$)")


@dataclass(frozen=True, slots=True, order=True)
class Ambiguity:
    """One file's search path holds one library name in several directories, as different files.

    Attributes:
        file: the ELF file.
        library: the library name found more than once.
        directories: where it is, in search order (the first one loads).

    Raises:
        Nothing: a value.
    """

    file: str
    library: str
    directories: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.file}: ambiguous RUNPATH: {self.library} is in "
                + " and ".join(self.directories) + " (different files; which one loads "
                "depends on the RUNPATH order)")

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "library": self.library,
                "directories": list(self.directories), "message": str(self)}


def ambiguities_of(path: str | os.PathLike[str], options: LddOptions | None = None
                   ) -> tuple[Ambiguity, ...]:
    """The ambiguous names of one file's search path; () for a non-ELF or static file."""
    name = os.fspath(path)
    try:
        info = read_elf_info(name)
    except ElfError:
        return ()
    if info is None or not info.has_dynamic:
        return ()
    directories = _directories(name, info, options or LddOptions())
    holders: dict[str, list[str]] = {}
    for directory in directories:
        for library in _libraries(directory):
            holders.setdefault(library, []).append(directory)
    found = []
    for library, where in sorted(holders.items()):
        distinct = _distinct(library, where, info)
        if len(distinct) > 1:
            found.append(Ambiguity(name, library, tuple(distinct)))
    return tuple(found)


def ambiguities_in(root: str | os.PathLike[str], options: LddOptions | None = None
                   ) -> list[Ambiguity]:
    """Every ELF file below ``root`` (or ``root`` itself), in path order."""
    return [a for p in files_under(root) for a in ambiguities_of(p, options)]


def _directories(path: str, info: ElfInfo, opts: LddOptions) -> list[str]:
    """The file's own search directories in order, each once (a repeat is no ambiguity)."""
    origin = os.path.dirname(os.path.abspath(path))
    raw = info.runpath if info.runpath is not None else info.rpath
    seen: list[str] = []
    for entry in split_search_path(raw):
        if not entry:
            continue
        directory = _mapped(entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin),
                            opts.maps)
        if directory not in seen:
            seen.append(directory)
    return seen


def _mapped(directory: str, maps: Sequence[tuple[str, str]]) -> str:
    for old, new in maps:
        if directory == old or directory.startswith(old.rstrip("/") + "/"):
            return new.rstrip("/") + directory[len(old.rstrip("/")):]
    return directory


def _libraries(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [n for n in names if _SHARED_OBJECT_NAME.search(n) and not is_driver_name(n)]


def _distinct(library: str, directories: list[str], info: ElfInfo) -> list[str]:
    """The directories whose copy of ``library`` the loader would take and that differ from
    every earlier one (by identity after symlinks, then by bytes)."""
    kept: list[tuple[str, str]] = []  # (directory, real file)
    for directory in directories:
        candidate = os.path.join(directory, library)
        if not loadable(candidate, info):
            continue
        real = os.path.realpath(candidate)
        if any(real == other or _same_bytes(real, other) for _d, other in kept):
            continue
        kept.append((directory, real))
    return [d for d, _real in kept]


def _same_bytes(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other) or filecmp.cmp(one, other, shallow=False)
    except OSError:
        return False
