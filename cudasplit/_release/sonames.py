"""The soname graph of a release: which ELF file provides which SONAME and needs which names.

One streaming pass per tarball (or unpacked directory, or split directory). The dynamic section
of a large library lies near its end and its string table near its start, so ELF members are
spooled to one reused temporary file and read with :func:`~cudasplit._elf.read.info.read_elf_info`
(the same technique as the extended feature scan; disk use is bounded by the largest ELF member).
Non-ELF members are skipped without reading their bytes.

``dlopen`` targets (names in read-only data that the library opens at run time: libcublasLt
opens ``libnvrtc.so.12``) come from :func:`~cudasplit._elf.read.scan_dlopen`. When a package's
table names a library it loads at run time (``runpath_append = ["@cuda_nvrtc@/lib"]``),
:mod:`cudasplit._release.nixify` counts that package as a dependency as well.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from cudasplit._elf.plan import is_driver_name
from cudasplit._elf.read import (
    ELF_MAGIC,
    ElfInfo,
    kind_from_head,
    read_elf_info,
    read_exports,
    scan_dlopen,
)
from cudasplit._model import MemberType
from cudasplit._source import open_source
from cudasplit.errors import ElfError

__all__ = ["ElfNames", "PackageLinks", "elf_names", "provider_index", "scan_elf_dir",
           "scan_elf_source"]


@dataclass(frozen=True, slots=True, order=True)
class ElfNames:
    """One ELF file: where it is (archive path, top directory stripped) and its links."""

    path: str
    soname: str | None
    needed: tuple[str, ...]
    dlopen: tuple[str, ...] = ()  # sorted; empty when dlopen detection is not available
    exports: tuple[str, ...] = ()  # dynamic symbols defined, ``name@@version`` (sorted)


@dataclass(frozen=True, slots=True)
class PackageLinks:
    """The soname facts of one package (one tarball)."""

    package: str
    files: tuple[ElfNames, ...]  # sorted by path

    @property
    def sonames(self) -> frozenset[str]:
        """What the package provides: SONAMEs, and file names of libraries without one. Stubs
        (``lib/stubs/libcuda.so``) provide nothing: they are link-time stand-ins for the
        driver, never what runs."""
        real = [f for f in self.files if "stubs" not in f.path.split("/")[:-1]]
        names = {f.soname for f in real if f.soname}
        names.update(os.path.basename(f.path) for f in real if ".so" in f.path)
        return frozenset(names)

    @property
    def needed(self) -> frozenset[str]:
        """Every DT_NEEDED name some file of the package lists, minus what it provides."""
        return frozenset(n for f in self.files for n in f.needed) - self.sonames

    @property
    def dlopened(self) -> frozenset[str]:
        """Every name some file of the package may ``dlopen``, minus what it provides."""
        return frozenset(n for f in self.files for n in f.dlopen) - self.sonames


def scan_elf_source(path: str | os.PathLike[str], *, jobs: int = 1,
                    on_bytes: Callable[[int], None] | None = None,
                    on_member: Callable[[str], None] | None = None) -> tuple[ElfNames, ...]:
    """Every ELF member of a tarball or unpacked redistributable, read in one pass
    (``on_bytes``: the tar bytes read so far, every few MiB; ``on_member``: each member's path
    as it comes)."""
    facts: list[ElfNames] = []
    source = open_source(path, jobs=jobs)
    meter = getattr(source, "meter", None)
    if on_bytes is not None and callable(meter):
        meter(on_bytes)
    with tempfile.NamedTemporaryFile(prefix="cudasplit-soname-") as spool:
        for member, stream in source.members():
            if on_member is not None:
                on_member(member.path)
            if member.type is not MemberType.FILE or stream is None:
                continue
            if kind_from_head(member.head) is None:
                continue
            found = _read_spooled(member.path, stream, spool)
            if found is not None:
                facts.append(found)
    return tuple(sorted(facts))


def _read_spooled(path: str, stream: BinaryIO, spool: IO[bytes]) -> ElfNames | None:
    spool.seek(0)
    spool.truncate()
    shutil.copyfileobj(stream, spool, 1 << 20)
    spool.flush()
    return _facts(path, spool.name)


def elf_names(path: str, file: str) -> ElfNames | None:
    """The SONAME, ``DT_NEEDED`` and ``dlopen`` names of the ELF file ``file`` (a spooled
    copy of member ``path``), without its exports (the SBOM's edges need none); None when it
    has no dynamic section or cannot be read (the split reports a damaged one)."""
    return _facts(path, file, exports=False)


def _facts(path: str, file: str, *, exports: bool = True) -> ElfNames | None:
    try:
        info = read_elf_info(file)
    except ElfError:
        # A damaged member has no links to report; the split itself reports it as a problem.
        return None
    if info is None or not info.has_dynamic:
        return None
    return ElfNames(path, info.soname, info.needed, _dlopen_names(file, info),
                    _exports(file) if exports else ())


def _exports(file: str) -> tuple[str, ...]:
    """``name@@version`` (default), ``name@version`` (hidden) or ``name`` of each export."""
    try:
        symbols = read_exports(file)
    except OSError:
        return ()
    return tuple(s.name + (("@@" if s.default else "@") + s.version if s.version else "")
                 for s in symbols)


def _dlopen_names(file: str, info: ElfInfo) -> tuple[str, ...]:
    try:
        return tuple(sorted({str(t.name) for t in scan_dlopen(file, info)}))
    except ElfError:
        return ()  # headers that lie: no dlopen facts, the DT_NEEDED ones stand


def scan_elf_dir(root: str | os.PathLike[str], *, exports: bool = True
                 ) -> tuple[ElfNames, ...]:
    """Every ELF file under ``root`` (an output of a split directory), symlinks not followed;
    ``exports``: also each file's exported symbols."""
    facts = []
    for rel, full in _files(Path(root)):
        with open(full, "rb") as fh:
            if fh.read(4) != ELF_MAGIC:
                continue
        found = _facts(rel, str(full), exports=exports)
        if found is not None:
            facts.append(found)
    return tuple(sorted(facts))


def _files(root: Path) -> Iterator[tuple[str, Path]]:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if not full.is_symlink() and full.is_file():
                yield str(full.relative_to(root)), full


def provider_index(packages: Iterable[PackageLinks]) -> dict[str, tuple[str, ...]]:
    """SONAME -> the packages that provide it (sorted; usually one)."""
    index: dict[str, set[str]] = {}
    for package in packages:
        for soname in package.sonames:
            index.setdefault(soname, set()).add(package.package)
    return {name: tuple(sorted(owners)) for name, owners in sorted(index.items())}


def dependencies(package: PackageLinks, index: Mapping[str, tuple[str, ...]]
                 ) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """(provider package -> the names it resolves, names no package of the release provides).

    DT_NEEDED names and ``dlopen`` names both count (a dlopen'ed library is as needed at run
    time); a dlopen name nobody in the release provides is not "unresolved": it may be the
    driver's (``libcuda.so.1``) or optional."""
    by_provider: dict[str, set[str]] = {}
    unresolved = []
    # The driver's libraries come from the driver link at run time, never from a package.
    for name in sorted(n for n in package.dlopened - package.needed if not is_driver_name(n)):
        for owner in (o for o in index.get(name, ()) if o != package.package):
            by_provider.setdefault(owner, set()).add(name)
    for name in sorted(n for n in package.needed if not is_driver_name(n)):
        owners = [o for o in index.get(name, ()) if o != package.package]
        if not owners:
            unresolved.append(name)
        for owner in owners:
            by_provider.setdefault(owner, set()).add(name)
    return ({k: tuple(sorted(v)) for k, v in sorted(by_provider.items())}, tuple(unresolved))
