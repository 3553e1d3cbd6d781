"""What is inside files and releases: GPU code, glibc floors, symbols, a prune plan, an SBOM.

Thin entry points over :mod:`cudasplit._elf.read` (one file), :mod:`cudasplit._release.pruneplan`
and :mod:`cudasplit._release.sbom`; none prints.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

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
from cudasplit._release.sbom import sbom_json, sbom_of
from cudasplit._run import resolve_jobs
from cudasplit.errors import ElfError, OptionsError, OptionsTypeError

PathLike = str | os.PathLike[str]

__all__ = ["ExportedSymbol", "FilePlan", "GpuCode", "Inside", "PrunePlan", "VersionNeed",
           "exported_symbols", "gpu_prune_plan", "inside_of", "sbom"]


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
    try:
        return read_inside(path)
    except OSError as exc:
        raise ElfError(f"{os.fspath(path)}: cannot read ({exc.strerror or exc})") from exc


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
    try:
        return read_exports(path)
    except OSError as exc:
        raise ElfError(f"{os.fspath(path)}: cannot read ({exc.strerror or exc})") from exc


@checked(jobs=0)
def gpu_prune_plan(source: PathLike, gpu_archs: str | Sequence[str], *,
                   jobs: int | None = None) -> PrunePlan:
    """A report-only plan: for each library of ``source``, the GPU code the GPUs in
    ``gpu_archs`` would use and the bytes the rest takes (nothing is ever changed).

    Args:
        source: a tarball, an unpacked tree, a split directory or one file.
        gpu_archs: compute capabilities: ``"8.0 9.0"``, ``"8.0;9.0"`` (Nixpkgs'
            ``cudaCapabilities``), ``"sm_90a"``, or a list of them.
        jobs: at most this many decoder threads for a tarball; ``None`` or 0: every
            available CPU.

    Returns:
        A :class:`PrunePlan` (``text_lines()``, ``as_dict()``).

    Raises:
        OptionsError: ``gpu_archs`` names no compute capability.
        SourceError: the source cannot be read.
    """
    return prune_plan(source, gpu_archs, jobs=resolve_jobs(jobs))


@checked(jobs=0)
def sbom(sources: Sequence[PathLike], *, manifest: PathLike | None = None,
         platform: str = "linux-x86_64", name: str | None = None,
         licence: str | None = None, jobs: int | None = None) -> str:
    """A CycloneDX 1.6 JSON SBOM: every file with its sha256, size, package, output and
    licence, nested in its package; GPU architectures and glibc floors as properties. The same
    input gives the same bytes (``SOURCE_DATE_EPOCH`` sets the timestamp, else 1970).

    Args:
        sources: tarballs, unpacked trees or split directories; with ``manifest``, the one
            directory holding its tarballs.
        manifest: NVIDIA's ``redistrib_*.json``: every package of ``platform``.
        platform: the platform taken from the manifest.
        name: the name of what the SBOM describes (default: the manifest's or first
            source's file name).
        licence: the licence name of packages a manifest does not name one for.
        jobs: at most this many decoder threads; ``None`` or 0: every available CPU.

    Returns:
        The JSON text, validated against the CycloneDX 1.6 schema.

    Raises:
        OptionsError: ``sources`` is empty.
        SourceError: a source or tarball cannot be read.
        ManifestError: the manifest cannot be read.
        CudasplitError: ``cyclonedx-python-lib`` is not installed.
    """
    if isinstance(sources, (str, os.PathLike)):
        raise OptionsTypeError("sources must be a list of paths, not one path")
    if not sources:
        raise OptionsError("sources must name at least one tarball, tree or split directory")
    packages = sbom_of(list(sources), manifest=None if manifest is None else os.fspath(manifest),
                       platform=platform, licence=licence, jobs=resolve_jobs(jobs))
    label = name or os.path.basename(os.fspath(manifest if manifest is not None
                                                 else sources[0]))
    return sbom_json(packages, label)
