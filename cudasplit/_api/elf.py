"""What ELF files and static archives carry: GPU code per architecture, the glibc floor,
exported symbols, and the plan of the GPU code a set of GPUs would keep (:mod:`cudasplit.elf`).

Thin entry points over :mod:`cudasplit._elf.read` (one file) and
:mod:`cudasplit._release.pruneplan`; none prints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from cudasplit._argcheck import checked
from cudasplit._elf.read import (
    ExportedSymbol,
    GpuCode,
    Inside,
    VersionNeed,
    read_exports,
    read_inside,
)
from cudasplit._release.pruneplan import FilePlan, PrunePlan, prune_plan
from cudasplit._run import ProgressCallback, resolve_jobs
from cudasplit.errors import ElfError

PathLike = str | os.PathLike[str]

__all__ = ["ExportedSymbol", "FilePlan", "GpuCode", "Inside", "PrunePlan", "VersionNeed",
           "exported_symbols", "gpu_prune_plan", "inside_of"]


@contextlib.contextmanager
def _readable(path: PathLike) -> Iterator[None]:
    """An OSError while reading ``path`` becomes the ElfError naming it."""
    try:
        yield
    except OSError as exc:
        raise ElfError(f"{os.fspath(path)}: cannot read ({exc.strerror or exc})") from exc


@checked
def inside_of(path: PathLike) -> Inside | None:
    """The GPU code (per kind and architecture) and the glibc floor of one ELF file or static
    archive, read from headers only.

    Args:
        path: the file.

    Returns:
        An :class:`Inside`, or ``None`` when the file is neither ELF nor a static archive.
        Damaged fatbinaries or version tables are listed in ``Inside.problems``.

    Raises:
        ElfError: the file cannot be opened.
    """
    with _readable(path):
        return read_inside(path)


@checked
def exported_symbols(path: PathLike) -> tuple[ExportedSymbol, ...]:
    """The dynamic symbols an ELF library defines, with their version nodes (``objdump -T``'s
    defined symbols).

    Args:
        path: the library.

    Returns:
        :class:`ExportedSymbol` values sorted by name (``()`` when the file is not ELF).

    Raises:
        ElfError: the file cannot be opened.
    """
    with _readable(path):
        return read_exports(path)


@checked(jobs=0)
def gpu_prune_plan(source: PathLike, gpu_archs: str | Sequence[str], *,
                   jobs: int | None = None, progress: ProgressCallback | None = None
                   ) -> PrunePlan:
    """A report-only plan: for each library of ``source``, the GPU code the GPUs in
    ``gpu_archs`` would use and the bytes the rest takes (nothing is ever changed).

    Args:
        source: a tarball, an unpacked tree, a split directory or one file.
        gpu_archs: compute capabilities: ``"8.0 9.0"``, ``"8.0;9.0"`` (Nixpkgs'
            ``cudaCapabilities``), ``"sm_90a"``, or a list of them.
        jobs: at most this many decoder threads for a tarball; ``None`` or 0: every
            available CPU.
        progress: called with a :class:`Progress` as the work goes: a tarball's members and
            the tar bytes read so far (every few MiB, within a large member too), or a
            directory's files (``unit`` ``"file"``).

    Returns:
        A :class:`PrunePlan` (``text_lines()``, ``as_dict()``).

    Raises:
        OptionsError: ``gpu_archs`` names no compute capability.
        SourceError: the source cannot be read; SourceNotFoundError (also a
            ``FileNotFoundError``) when it does not exist.
    """
    return prune_plan(source, gpu_archs, jobs=resolve_jobs(jobs), progress=progress)
